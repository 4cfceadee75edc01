// go-client: a kubelet-style grpc-go client for the device plugin socket, built from
// Debian's grpc-go. It dials exactly like the kubelet (insecure, blocking, unix dialer,
// :authority "localhost") and speaks raw protobuf bytes through a pass-through codec,
// so it needs no generated code. Used by the interop test, the Allocate benchmark and
// scripts/gpu-smoke.sh (built with CGO_ENABLED=0: one static binary a bare host can run).
//
//	go-client interop <socket> <id>...            every RPC, checked; exit 1 on mismatch
//	go-client bench-allocate <socket> <n> <id>... n sequential Allocate calls, prints µs
//	go-client watch <socket>                      one line per ListAndWatch message:
//	                                              "<CLOCK_MONOTONIC ns> <unhealthy ids, comma-joined or ->"
//	go-client kubelet-restarts <dir> <n>          the kubelet's side of n restarts (kubelet.go)
//	go-client smoke <dir>                         the kubelet's side of one start (smoke.go)
//	go-client bench-prepare <socket> <pace ms>    DRA Prepare / Unprepare timed (dra.go)
package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string   { return "proto" }
func (rawCodec) String() string { return "proto" } // grpc.Codec, for the server side

func dial(socket string) *grpc.ClientConn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, socket,
		grpc.WithInsecure(), grpc.WithBlock(), grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		fail("dial %s: %v", socket, err)
	}
	return conn
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "go-client: "+format+"\n", args...)
	os.Exit(1)
}

// allocateRequest encodes AllocateRequest{container_requests: [{devices_ids: ids}]}.
func allocateRequest(ids []string) []byte {
	var inner []byte
	for _, id := range ids {
		inner = protowire.AppendTag(inner, 1, protowire.BytesType)
		inner = protowire.AppendString(inner, id)
	}
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	return protowire.AppendBytes(out, inner)
}

// fields returns the length-delimited fields with number num of a message.
func fields(msg []byte, num protowire.Number) [][]byte {
	var out [][]byte
	for len(msg) > 0 {
		n, t, l := protowire.ConsumeTag(msg)
		if l < 0 {
			fail("malformed message")
		}
		msg = msg[l:]
		if t == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				fail("malformed field")
			}
			if n == num {
				out = append(out, v)
			}
			msg = msg[m:]
		} else {
			m := protowire.ConsumeFieldValue(n, t, msg)
			if m < 0 {
				fail("malformed field")
			}
			msg = msg[m:]
		}
	}
	return out
}

// invoke is every unary call of this client: the method's full path, its deadline, the
// answer and how long it took.
func invoke(conn *grpc.ClientConn, path string, req []byte, timeout time.Duration) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var resp []byte
	t0 := time.Now()
	err := conn.Invoke(ctx, path, &req, &resp)
	return resp, time.Since(t0), err
}

func call(conn *grpc.ClientConn, method string, req []byte) ([]byte, error) {
	resp, _, err := invoke(conn, "/v1beta1.DevicePlugin/"+method, req, 10*time.Second)
	return resp, err
}

func interop(socket string, ids []string) {
	conn := dial(socket)
	defer conn.Close()
	opts, err := call(conn, "GetDevicePluginOptions", []byte{})
	if err != nil || len(opts) != 2 || opts[0] != 0x10 || opts[1] != 1 {
		fail("GetDevicePluginOptions: %v %x", err, opts)
	}
	// ListAndWatch: the first message lists every device.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := serverStream(ctx, conn, "/v1beta1.DevicePlugin/ListAndWatch")
	var list []byte
	if err := stream.RecvMsg(&list); err != nil {
		fail("ListAndWatch recv: %v", err)
	}
	seen := map[string]bool{}
	for _, dev := range fields(list, 1) {
		for _, id := range fields(dev, 1) {
			seen[string(id)] = true
		}
	}
	for _, id := range ids {
		if !seen[id] {
			fail("ListAndWatch: device %s missing", id)
		}
	}
	resp, err := call(conn, "Allocate", allocateRequest(ids[:1]))
	if err != nil {
		fail("Allocate: %v", err)
	}
	found := false
	for _, c := range fields(resp, 1) {
		for _, e := range fields(c, 1) {
			k := fields(e, 1)
			v := fields(e, 2)
			if len(k) == 1 && len(v) == 1 && string(k[0]) == "NVIDIA_VISIBLE_DEVICES" && string(v[0]) == ids[0] {
				found = true
			}
		}
	}
	if !found {
		fail("Allocate: NVIDIA_VISIBLE_DEVICES=%s missing in %x", ids[0], resp)
	}
	if _, err := call(conn, "Allocate", allocateRequest([]string{"GPU-not-a-device"})); err == nil {
		fail("Allocate of an unknown ID succeeded")
	}
	if _, err := call(conn, "PreStartContainer", []byte{}); err != nil {
		fail("PreStartContainer: %v", err)
	}
	fmt.Println("interop ok")
}

func benchAllocate(socket string, n int, ids []string) {
	conn := dial(socket)
	defer conn.Close()
	req := allocateRequest(ids)
	for i := 0; i < 200; i++ { // warm-up
		if _, err := call(conn, "Allocate", req); err != nil {
			fail("Allocate: %v", err)
		}
	}
	lat := make([]float64, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := call(conn, "Allocate", req); err != nil {
			fail("Allocate: %v", err)
		}
		lat[i] = float64(time.Since(t0).Nanoseconds()) / 1000
	}
	sort.Float64s(lat)
	fmt.Printf("{\"client\":\"grpc-go\",\"calls\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f}\n",
		n, lat[n/2], lat[n*99/100], lat[n-1])
}

// monotonicNs reads CLOCK_MONOTONIC, the clock Python's time.monotonic_ns() uses, so a
// driver script can compare its own timestamps with ours.
func monotonicNs() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// serverStream opens a server-streaming method the way the kubelet does (ListAndWatch,
// NodeWatchResources): one empty request sent, the send side closed, the responses read
// by the caller.
func serverStream(ctx context.Context, conn *grpc.ClientConn, method string) grpc.ClientStream {
	name := method[strings.LastIndex(method, "/")+1:]
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		fail("%s: %v", name, err)
	}
	empty := []byte{}
	if err := stream.SendMsg(&empty); err != nil {
		fail("%s send: %v", name, err)
	}
	stream.CloseSend()
	return stream
}

func listAndWatch(conn *grpc.ClientConn) grpc.ClientStream {
	return serverStream(context.Background(), conn, "/v1beta1.DevicePlugin/ListAndWatch")
}

func watch(socket string) {
	conn := dial(socket)
	defer conn.Close()
	stream := listAndWatch(conn)
	out := bufio.NewWriter(os.Stdout)
	for {
		var list []byte
		if err := stream.RecvMsg(&list); err != nil {
			return
		}
		t := monotonicNs()
		var bad []string
		for _, dev := range fields(list, 1) {
			ids, health := fields(dev, 1), fields(dev, 2)
			if len(ids) == 1 && len(health) == 1 && string(health[0]) == "Unhealthy" {
				bad = append(bad, string(ids[0]))
			}
		}
		line := "-"
		if len(bad) > 0 {
			line = strings.Join(bad, ",")
		}
		fmt.Fprintf(out, "%d %s\n", t, line)
		out.Flush()
	}
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: go-client interop <socket> <id>... | bench-allocate <socket> <n> <id>...")
	}
	switch os.Args[1] {
	case "watch":
		watch(os.Args[2])
	case "interop":
		interop(os.Args[2], os.Args[3:])
	case "bench-allocate":
		n, err := strconv.Atoi(os.Args[3])
		if err != nil || n < 1 || len(os.Args) < 5 {
			fail("bench-allocate <socket> <n> <id>...")
		}
		benchAllocate(os.Args[2], n, os.Args[4:])
	case "bench-prepare":
		benchPrepareMain(os.Args[2:])
	case "smoke":
		smoke(os.Args[2])
	case "dra-smoke":
		draSmoke(os.Args[2:])
	case "kubelet-restarts":
		n, err := strconv.Atoi(os.Args[3])
		if err != nil || n < 1 {
			fail("kubelet-restarts <dir> <n>")
		}
		kubeletRestarts(os.Args[2], n)
	default:
		fail("unknown mode %s", os.Args[1])
	}
}
