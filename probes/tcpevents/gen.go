package tcpevents

//go:generate go tool bpf2go -tags linux -target bpfel -type tcp_event_key -type tcp_event_count -type tcpevents_event -type tcpevents_rtx_kind -type tcpevents_lost -type tcpevents_hook -type tcp_feed -type self_cost tcpevents bpf/tcpevents.bpf.c -- -I../include -O2 -g -Wall -Werror
