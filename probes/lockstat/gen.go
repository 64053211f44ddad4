package lockstat

//go:generate go tool bpf2go -tags linux -target bpfel -type site_key -type wait_stat -type inflight_key -type inflight_wait -type lock_owner -type lockstat_lost -type lockstat_sock_field -type lockstat_hook -type sockwait_key -type lockstat_sock_wait -type self_cost lockstat bpf/lockstat.bpf.c -- -I../include -O2 -g -Wall -Werror
