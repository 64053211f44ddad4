package lockstat

//go:generate go tool bpf2go -tags linux -target bpfel -type site_key -type wait_stat -type lockstat_lost lockstat bpf/lockstat.bpf.c -- -I../include -O2 -g -Wall -Werror
