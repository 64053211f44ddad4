package offcpu

//go:generate go tool bpf2go -tags linux -target bpfel -type thread_state -type wait_key -type wait_stat -type hist -type proc_key -type offcpu_config -type offcpu_runq_kind -type offcpu_lost -type offcpu_hook -type self_cost offcpu bpf/offcpu.bpf.c -- -I../include -O2 -g -Wall -Werror
