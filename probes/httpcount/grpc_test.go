package httpcount_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/perfscope/perfscope/probes/httpcount"
)

// A real gRPC service — grpc-go's own health service, served and called
// by grpc-go over h2c as a cluster runs gRPC without TLS — is counted one
// response per call, the failed ones included (a gRPC error is a response
// with a grpc-status trailer), on both paths.
func TestProbeCountsGRPCCalls(t *testing.T) {
	ln, port := rootListener(t)
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(ln)
	defer srv.Stop()
	for _, path := range []httpcount.Path{httpcount.PathSocket, httpcount.PathSyscall} {
		t.Run(string(path), func(t *testing.T) {
			const ok, unknown = 300, 20
			d := countDuring(t, httpcount.Options{Path: path}, port, func() {
				// A new connection: the probe sees the server's SETTINGS.
				conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				client := healthpb.NewHealthClient(conn)
				for i := 0; i < ok; i++ {
					if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "orders"}); err != nil {
						t.Fatal(err)
					}
				}
				for i := 0; i < unknown; i++ {
					_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "missing"})
					if status.Code(err).String() != "NotFound" {
						t.Fatalf("check of an unknown service: %v, want NotFound", err)
					}
				}
			})
			if d.H2Responses[port] != ok+unknown || d.Final() != ok+unknown {
				t.Errorf("gRPC responses %d (final %d), want %d", d.H2Responses[port], d.Final(), ok+unknown)
			}
			if d.Lost != (httpcount.Lost{}) {
				t.Errorf("lost %+v", d.Lost)
			}
		})
	}
}
