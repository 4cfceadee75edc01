"""Kubelet device-plugin API (v1beta1) for the Python peers of the plugin.

The message classes are built at import time from api/api.proto and
api/deviceplugin.proto compiled by protoc (Debian's protobuf-compiler 3.21 matches
python3-protobuf 4.21), so the tests always speak the schema in the tree and no
generated file is committed or written. The services are reached through grpcio's generic
API, so grpc_tools is not needed.

Usage:
    import dpapi
    pb = dpapi.pb                       # message classes (pb.AllocateRequest, ...)
    stub = dpapi.PluginStub(channel)    # stub.Allocate(req, timeout=10) ...
    handler = dpapi.registration_handler(fn)  # fn(RegisterRequest, context) -> Empty
"""

import os
import subprocess
import types

import grpc
from google.protobuf import descriptor_pb2, message_factory

_HERE = os.path.dirname(os.path.abspath(__file__))
API_DIR = os.environ.get("GDP_API_DIR") or os.path.normpath(os.path.join(_HERE, "..", "..", "api"))

VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"

REGISTER = "/v1beta1.Registration/Register"
GET_OPTIONS = "/v1beta1.DevicePlugin/GetDevicePluginOptions"
LIST_AND_WATCH = "/v1beta1.DevicePlugin/ListAndWatch"
GET_PREFERRED = "/v1beta1.DevicePlugin/GetPreferredAllocation"
ALLOCATE = "/v1beta1.DevicePlugin/Allocate"
PRESTART = "/v1beta1.DevicePlugin/PreStartContainer"


def _generate():
    """Compiles the schema with protoc into a descriptor set read from its stdout and
    builds the message classes from it in memory: no generated module touches the disk,
    so nothing is left in $TMPDIR whichever way this process ends."""
    r = subprocess.run(["protoc", "--proto_path=" + API_DIR, "--include_imports",
                        "--descriptor_set_out=/dev/stdout",
                        os.path.join(API_DIR, "api.proto"),
                        os.path.join(API_DIR, "deviceplugin.proto")],
                       check=True, stdout=subprocess.PIPE)
    files = descriptor_pb2.FileDescriptorSet.FromString(r.stdout).file
    classes = message_factory.GetMessages(files)
    # Top-level messages of package v1beta1 as attributes, like a generated api_pb2.
    return types.SimpleNamespace(**{name.split(".", 1)[1]: cls for name, cls in classes.items()
                                    if name.count(".") == 1})


pb = _generate()


def _unary(channel, path, req_cls, resp_cls):
    return channel.unary_unary(path, request_serializer=req_cls.SerializeToString,
                               response_deserializer=resp_cls.FromString)


class PluginStub:
    """Client side of v1beta1.DevicePlugin on one channel."""

    def __init__(self, channel):
        self.GetDevicePluginOptions = _unary(channel, GET_OPTIONS, pb.Empty, pb.DevicePluginOptions)
        self.ListAndWatch = channel.unary_stream(
            LIST_AND_WATCH, request_serializer=pb.Empty.SerializeToString,
            response_deserializer=pb.ListAndWatchResponse.FromString)
        self.GetPreferredAllocation = _unary(channel, GET_PREFERRED, pb.PreferredAllocationRequest,
                                             pb.PreferredAllocationResponse)
        self.Allocate = _unary(channel, ALLOCATE, pb.AllocateRequest, pb.AllocateResponse)
        self.PreStartContainer = _unary(channel, PRESTART, pb.PreStartContainerRequest,
                                        pb.PreStartContainerResponse)


class RegistrationStub:
    """Client side of v1beta1.Registration (what a plugin calls)."""

    def __init__(self, channel):
        self.Register = _unary(channel, REGISTER, pb.RegisterRequest, pb.Empty)


def registration_handler(register_fn):
    """A generic handler serving v1beta1.Registration/Register with register_fn."""
    return grpc.method_handlers_generic_handler("v1beta1.Registration", {
        "Register": grpc.unary_unary_rpc_method_handler(
            register_fn, request_deserializer=pb.RegisterRequest.FromString,
            response_serializer=pb.Empty.SerializeToString),
    })


def unix_target(path):
    """gRPC target for a Unix socket path (made absolute: `unix:` wants one)."""
    return "unix:" + os.path.abspath(path)


def dial(path, authority="localhost"):
    """An insecure channel to a Unix socket, with the :authority the kubelet sends."""
    return grpc.insecure_channel(unix_target(path), options=[
        ("grpc.default_authority", authority),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ])


# ---------------------------------------------------------------- to plain data

def options_dict(o):
    return {"pre_start_required": o.pre_start_required,
            "get_preferred_allocation_available": o.get_preferred_allocation_available}


def device_dict(d):
    numa = [n.ID for n in d.topology.nodes] if d.HasField("topology") else None
    return {"id": d.ID, "health": d.health, "numa": numa}


def container_allocate_dict(c):
    return {
        "envs": dict(c.envs),
        "mounts": [{"container_path": m.container_path, "host_path": m.host_path,
                    "read_only": m.read_only} for m in c.mounts],
        "devices": [{"container_path": d.container_path, "host_path": d.host_path,
                     "permissions": d.permissions} for d in c.devices],
        "annotations": dict(c.annotations),
        "cdi_devices": [d.name for d in c.cdi_devices],
    }


def allocate_request(containers):
    """containers: list of lists of device IDs."""
    return pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=list(ids)) for ids in containers])


def preferred_request(containers):
    """containers: list of {"available": [..], "must_include": [..], "size": N}."""
    return pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=list(c.get("available", [])),
            must_include_deviceIDs=list(c.get("must_include", [])),
            allocation_size=int(c.get("size", 0)))
        for c in containers])


def status_dict(err):
    """{"code": "UNKNOWN", "message": ...} for a grpc.RpcError."""
    code = err.code() if hasattr(err, "code") else None
    return {"code": code.name if code is not None else "UNKNOWN",
            "message": err.details() if hasattr(err, "details") else str(err)}
