package goalloc

//go:generate go tool bpf2go -tags linux -target bpfel -type alloc_key -type pool_counts -type goalloc_counter -type goalloc_hook -type self_cost goalloc bpf/goalloc.bpf.c -- -I../include -O2 -g -Wall -Werror
