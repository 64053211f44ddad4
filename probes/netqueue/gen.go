package netqueue

//go:generate go tool bpf2go -tags linux -target bpfel -type napi_key -type napi_stat -type traffic_stat -type qdisc_stat -type napi_queue_key -type netqueue_lost -type netqueue_hook -type self_cost netqueue bpf/netqueue.bpf.c -- -I../include -O2 -g -Wall -Werror
