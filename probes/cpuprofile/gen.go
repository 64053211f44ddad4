package cpuprofile

//go:generate go tool bpf2go -tags linux -target bpfel -type sample_key -type lost_reason -type cpuprofile_hook -type self_cost cpuprofile bpf/cpuprofile.bpf.c -- -I../include -O2 -g -Wall -Werror
