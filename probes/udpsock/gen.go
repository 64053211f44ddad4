package udpsock

//go:generate go tool bpf2go -tags linux -target bpfel -type sock_reads -type sock_slot -type udpsock_lost -type udpsock_hook -type udpsock_total -type self_cost udpsock bpf/udpsock.bpf.c -- -I../include -O2 -g -Wall -Werror
