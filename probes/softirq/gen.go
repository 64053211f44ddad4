package softirq

//go:generate go tool bpf2go -tags linux -target bpfel -type softirq_vec_stat -type softirq_latency_hist softirq bpf/softirq.bpf.c -- -I../include -O2 -g -Wall -Werror
