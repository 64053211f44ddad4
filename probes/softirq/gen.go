package softirq

//go:generate go tool bpf2go -tags linux -target bpfel -type softirq_vec_stat -type softirq_latency_hist -type softirq_hook -type self_cost softirq bpf/softirq.bpf.c -- -I../include -O2 -g -Wall -Werror
