// The kubelet's side of one plugin start, for scripts/gpu-smoke.sh on a host that has no
// Python: serve Registration on <dir>/kubelet.sock, take the first Register, answer it
// and dial the endpoint back the way the kubelet does (GetDevicePluginOptions, then
// ListAndWatch), ask for a preferred allocation when the plugin offers one, and
// Allocate the first device. Each step prints one "<step>: ..." line; the last is
// "smoke ok". The ListAndWatch stream and the registration socket stay open until the
// process is killed, so the plugin keeps seeing a live kubelet while the caller
// measures it.
//
//	go-client smoke <dir>
package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// scalar returns the last varint field with number num of a message (0 when absent).
func scalar(msg []byte, num protowire.Number) uint64 {
	var v uint64
	for len(msg) > 0 {
		n, t, l := protowire.ConsumeTag(msg)
		if l < 0 {
			fail("malformed message")
		}
		msg = msg[l:]
		if n == num && t == protowire.VarintType {
			x, m := protowire.ConsumeVarint(msg)
			if m < 0 {
				fail("malformed varint")
			}
			v = x
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(n, t, msg)
		if m < 0 {
			fail("malformed field")
		}
		msg = msg[m:]
	}
	return v
}

func str(msg []byte, num protowire.Number) string {
	f := fields(msg, num)
	if len(f) == 0 {
		return ""
	}
	return string(f[len(f)-1])
}

func describeOptions(opts []byte) string {
	return fmt.Sprintf("preStartRequired=%t getPreferredAllocationAvailable=%t",
		scalar(opts, 1) != 0, scalar(opts, 2) != 0)
}

// preferredRequest encodes PreferredAllocationRequest for one container.
func preferredRequest(available []string, size int) []byte {
	var inner []byte
	for _, id := range available {
		inner = protowire.AppendTag(inner, 1, protowire.BytesType)
		inner = protowire.AppendString(inner, id)
	}
	inner = protowire.AppendTag(inner, 3, protowire.VarintType)
	inner = protowire.AppendVarint(inner, uint64(size))
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	return protowire.AppendBytes(out, inner)
}

// mapEntries returns "key=value" for each entry of a map<string,string> field.
func mapEntries(msg []byte, num protowire.Number) []string {
	var out []string
	for _, e := range fields(msg, num) {
		out = append(out, str(e, 1)+"="+str(e, 2))
	}
	return out
}

func smoke(dir string) {
	registered := make(chan []byte, 1)
	handler := registrationHandler(func(req []byte) {
		select {
		case registered <- req:
		default: // only the first one is checked
		}
	})
	sock := filepath.Join(dir, "kubelet.sock")
	srv := grpc.NewServer(grpc.CustomCodec(rawCodec{}), grpc.UnknownServiceHandler(handler))
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fail("listen %s: %v", sock, err)
	}
	go srv.Serve(lis)
	fmt.Printf("kubelet: serving Registration on %s\n", sock)

	var req []byte
	select {
	case req = <-registered:
	case <-time.After(60 * time.Second):
		fail("register: nothing within 60 s")
	}
	version, endpoint, resource := str(req, 1), str(req, 2), str(req, 3)
	opts := fields(req, 4)
	regOpts := []byte{}
	if len(opts) > 0 {
		regOpts = opts[len(opts)-1]
	}
	fmt.Printf("register: version=%s endpoint=%s resource=%s %s\n", version, endpoint, resource,
		describeOptions(regOpts))
	if version != "v1beta1" || endpoint == "" || resource == "" || strings.Contains(endpoint, "/") {
		fail("register: unexpected request")
	}

	conn := dial(filepath.Join(dir, endpoint))
	opt, err := call(conn, "GetDevicePluginOptions", []byte{})
	if err != nil {
		fail("GetDevicePluginOptions: %v", err)
	}
	fmt.Printf("options: %s\n", describeOptions(opt))

	stream := listAndWatch(conn)
	var list []byte
	got := make(chan error, 1)
	go func() { got <- stream.RecvMsg(&list) }()
	select {
	case err = <-got:
		if err != nil {
			fail("ListAndWatch recv: %v", err)
		}
	case <-time.After(10 * time.Second):
		fail("ListAndWatch: no list within 10 s")
	}
	var ids []string
	healthy := 0
	for _, dev := range fields(list, 1) {
		ids = append(ids, str(dev, 1))
		if str(dev, 2) == "Healthy" {
			healthy++
		}
	}
	if len(ids) == 0 {
		fail("listandwatch: the first list is empty")
	}
	fmt.Printf("listandwatch: %d device(s), %d Healthy, first %s\n", len(ids), healthy, ids[0])

	if scalar(opt, 2) != 0 {
		size := 2
		if len(ids) < size {
			size = len(ids)
		}
		resp, err := call(conn, "GetPreferredAllocation", preferredRequest(ids, size))
		if err != nil {
			fail("GetPreferredAllocation: %v", err)
		}
		var picked []string
		for _, c := range fields(resp, 1) {
			for _, id := range fields(c, 1) {
				picked = append(picked, string(id))
			}
		}
		if len(picked) != size {
			fail("GetPreferredAllocation: %d device(s) for size %d", len(picked), size)
		}
		fmt.Printf("preferred: size %d of %d -> %s\n", size, len(ids), strings.Join(picked, ","))
	}

	resp, err := call(conn, "Allocate", allocateRequest(ids[:1]))
	if err != nil {
		fail("Allocate: %v", err)
	}
	containers := fields(resp, 1)
	if len(containers) != 1 {
		fail("Allocate: %d container responses for 1 request", len(containers))
	}
	c := containers[0]
	envs := mapEntries(c, 1)
	if len(envs) == 0 && len(fields(c, 5)) == 0 && len(mapEntries(c, 4)) == 0 {
		fail("Allocate: the response names no device (no envs, annotations or CDI devices)")
	}
	fmt.Printf("allocate: %s -> envs [%s], %d mount(s), %d device spec(s), %d annotation(s), %d CDI device(s)\n",
		ids[0], strings.Join(envs, " "), len(fields(c, 2)), len(fields(c, 3)),
		len(mapEntries(c, 4)), len(fields(c, 5)))
	fmt.Println("smoke ok")
	os.Stdout.Sync()
	select {} // keep the kubelet and the stream up until killed
}
