package httpcount

//go:generate go tool bpf2go -tags linux -target bpfel -type request_key -type httpcount_lost -type http_method -type httpcount_hook -type self_cost -type port_set httpcount bpf/httpcount.bpf.c -- -I../include -O2 -g -Wall -Werror
