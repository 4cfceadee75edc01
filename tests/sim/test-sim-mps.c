/* The simulated MPS (docs/simulator.md, "MPS"): the nvidia-cuda-mps-control stand-in's
 * daemon, commands and recording, the libcuda stand-in honouring the daemon's defaults and
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (cumulative, freed memory returns), servers keeping the
 * limits they started with, the nvidia-smi stand-in's recording and -c, the driver root's
 * copy. One process per case (`test-sim-mps <case>`): cuInit is once per process. */
#include <signal.h>
#include <sys/wait.h>

#include "sim-cuda-test.h"

#define MPS_TOOL "sim/cuda/nvidia-cuda-mps-control"

static char pipe_dir[512], log_dir[512], rec_path[512], env_lines[1200];

static void stop_daemon(void)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/nvidia-cuda-mps-control.pid", pipe_dir);
    char *pid = slurp(p);
    if (atoi(pid) > 0)
        kill(atoi(pid), SIGTERM);
    free(pid);
}

/* The daemon's directories and the recording; a failed case's daemon is stopped. */
static void mps_setup(void)
{
    host_setup("615.20.01");
    snprintf(pipe_dir, sizeof(pipe_dir), "%s", scratch_socket_dir("mps-pipe-"));
    snprintf(log_dir, sizeof(log_dir), "%s/log", tmpdir);
    snprintf(rec_path, sizeof(rec_path), "%s/mps.rec", tmpdir);
    setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir, 1);
    setenv("CUDA_MPS_LOG_DIRECTORY", log_dir, 1);
    setenv("MOCK_MPS_LOG", rec_path, 1);
    snprintf(env_lines, sizeof(env_lines), "env CUDA_MPS_PIPE_DIRECTORY=%s\nenv CUDA_MPS_LOG_DIRECTORY=%s\n",
             pipe_dir, log_dir);
    atexit(stop_daemon);
}

static int mps(const char *in, char *out, size_t outlen)
{
    return run_tool(MPS_TOOL, NULL, in, out, outlen);
}

static void mps_ok(const char *in, const char *want_out)
{
    char out[4096];
    int rc = mps(in, out, sizeof(out));
    if (rc != 0)
        FAIL("'%s': exit %d, output '%s'", in, rc, out);
    TEXT_EQ(out, want_out);
}

static void daemon_start(void)
{
    char out[256];
    const char *d[] = { "-d", NULL };
    CHECK(run_tool(MPS_TOOL, d, NULL, out, sizeof(out)) == 0);
}

/* quit, then wait until the daemon removed its socket. */
static void daemon_quit(void)
{
    mps_ok("quit\n", "");
    char p[600];
    snprintf(p, sizeof(p), "%s/control", pipe_dir);
    for (int i = 0; i < 200 && access(p, F_OK) == 0; i++)
        usleep(10000);
    CHECK(access(p, F_OK) != 0);
}

static char *state(void)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/nvidia-sim-mps.state", pipe_dir);
    return slurp(p);
}

static void case_record(void)
{
    mps_setup();
    char out[4096], want[16384];
    const char *d[] = { "-d", NULL }, *dm[] = { "-d", "-M", NULL };
    /* No daemon: commands fail. */
    CHECK(mps("get_server_list\n", out, sizeof(out)) == 1);
    daemon_start();
    mps_ok("set_default_active_thread_percentage 25\n"
           "set_default_device_pinned_mem_limit " GPU0 " 1024M\n"
           "  set_default_device_pinned_mem_limit 1 2G  \n"
           "\n"
           "get_default_active_thread_percentage\n"
           "get_default_device_pinned_mem_limit " GPU0 "\n"
           "get_default_device_pinned_mem_limit 1\n"
           "get_default_device_pinned_mem_limit 7\n"
           "get_server_list\n",
           "25.0\n1024M\n2048M\nnone\n");
    /* Refused values, an unknown command: the exit status says so. */
    CHECK(mps("set_default_active_thread_percentage 101\nset_default_device_pinned_mem_limit 0 12\nps\n", out,
              sizeof(out)) == 1);
    TEXT_EQ(out, "set_default_active_thread_percentage: invalid value\n"
                 "set_default_device_pinned_mem_limit: invalid value\n"
                 "ps: command not supported by the simulated control daemon\n");
    /* One daemon per pipe directory. */
    CHECK(run_tool(MPS_TOOL, dm, NULL, out, sizeof(out)) == 1);
    char *st = state(), *pid = NULL;
    char p[600];
    snprintf(p, sizeof(p), "%s/nvidia-cuda-mps-control.pid", pipe_dir);
    pid = slurp(p);
    snprintf(want, sizeof(want),
             "pid %d\nmultiuser 0\ndefault_active_thread_percentage 25.0\n"
             "default_device_pinned_mem_limit " GPU0 " 1073741824\n"
             "default_device_pinned_mem_limit 1 2147483648\n",
             atoi(pid));
    TEXT_EQ(st, want);
    free(st);
    free(pid);
    daemon_quit();
    snprintf(p, sizeof(p), "%s/nvidia-sim-mps.state", pipe_dir);
    CHECK(access(p, F_OK) != 0);
    /* Multi-user, and a control log as the real daemon keeps one. */
    CHECK(run_tool(MPS_TOOL, dm, NULL, out, sizeof(out)) == 0);
    st = state();
    CHECK(strstr(st, "\nmultiuser 1\n"));
    free(st);
    daemon_quit();
    snprintf(p, sizeof(p), "%s/control.log", log_dir);
    char *clog = slurp(p);
    CHECK(strstr(clog, "] Starting control daemon using socket "));
    CHECK(strstr(clog, "] Cmd:set_default_device_pinned_mem_limit 1 2G\n"));
    CHECK(strstr(clog, "] Exit\n"));
    free(clog);

    const char *e = env_lines;
    snprintf(want, sizeof(want),
             "nvidia-cuda-mps-control\n%sstdin get_server_list\nstderr Cannot find MPS control daemon process\nexit 1\n"
             "nvidia-cuda-mps-control -d\n%sexit 0\n"
             "nvidia-cuda-mps-control\n%s"
             "stdin set_default_active_thread_percentage 25\n"
             "stdin set_default_device_pinned_mem_limit " GPU0 " 1024M\n"
             "stdin set_default_device_pinned_mem_limit 1 2G\n"
             "stdin get_default_active_thread_percentage\nstdout 25.0\n"
             "stdin get_default_device_pinned_mem_limit " GPU0 "\nstdout 1024M\n"
             "stdin get_default_device_pinned_mem_limit 1\nstdout 2048M\n"
             "stdin get_default_device_pinned_mem_limit 7\nstdout none\n"
             "stdin get_server_list\n"
             "exit 0\n"
             "nvidia-cuda-mps-control\n%s"
             "stdin set_default_active_thread_percentage 101\n"
             "stdout set_default_active_thread_percentage: invalid value\n"
             "stdin set_default_device_pinned_mem_limit 0 12\n"
             "stdout set_default_device_pinned_mem_limit: invalid value\n"
             "stdin ps\nstdout ps: command not supported by the simulated control daemon\n"
             "exit 1\n"
             "nvidia-cuda-mps-control -d -M\n%sstderr An instance of this daemon is already running\nexit 1\n"
             "nvidia-cuda-mps-control\n%sstdin quit\nexit 0\n"
             "nvidia-cuda-mps-control -d -M\n%sexit 0\n"
             "nvidia-cuda-mps-control\n%sstdin quit\nexit 0\n",
             e, e, e, e, e, e, e, e);
    char *rec = slurp(rec_path);
    TEXT_EQ(rec, want);
    free(rec);
    (void)d;
}

static const char *debug_path(void)
{
    static char p[600];
    snprintf(p, sizeof(p), "%s/cuda-mps.debug", tmpdir);
    return p;
}

/* The daemon's defaults, lowered by the client's variables; allocations add up, a free
 * gives memory back. */
static void case_limits(void)
{
    mps_setup();
    daemon_start();
    mps_ok("set_default_active_thread_percentage 50\n"
           "set_default_device_pinned_mem_limit " GPU0 " 2G\n"
           "set_default_device_pinned_mem_limit 1 1024M\n",
           "");
    setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1536M,1=4G", 1);
    setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "80", 1);
    setenv("MOCK_CUDA_MPS_DEBUG", debug_path(), 1);
    load_cuda();
    cuda_ctx(0);
    CUdeviceptr a, b;
    CU(cu_alloc(GiB, &a), CUDA_SUCCESS);
    CU(cu_alloc(512 * MiB, &b), CUDA_SUCCESS);
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CU(C(cuMemFree_v2)(a), CUDA_SUCCESS);
    CU(cu_alloc(GiB + 1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CU(cu_alloc(GiB, NULL), CUDA_SUCCESS);
    size_t fr, tot; /* an MPS limit shows in free, not in total */
    CU(C(cuMemGetInfo_v2)(&fr, &tot), CUDA_SUCCESS);
    CHECK(fr == 0 && tot == 80 * GiB);
    cuda_ctx(1);
    CU(cu_alloc(GiB, NULL), CUDA_SUCCESS);
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    char server[64];
    CHECK(mps("get_server_list\n", server, sizeof(server)) == 0);
    server[strcspn(server, "\n")] = 0;
    char want[2048];
    snprintf(want, sizeof(want),
             "mps %s server %s\n"
             "device 0 " GPU0 " pinned 1610612736 thread 50.0\n"
             "device 1 " GPU1 " pinned 1073741824 thread 50.0\n",
             pipe_dir, server);
    char *dbg = slurp(debug_path());
    TEXT_EQ(dbg, want);
    free(dbg);
    char *st = state();
    snprintf(want, sizeof(want), "server %s clients 1 active_thread_percentage 50.0\n", server);
    CHECK(strstr(st, want));
    free(st);
    daemon_quit();
}

/* A client whose limit names a device it does not see drops every pinned limit (NVIDIA's
 * measured escape); a malformed variable is ignored; no daemon, no MPS at all. */
static void case_escape(void)
{
    mps_setup();
    daemon_start();
    mps_ok("set_default_device_pinned_mem_limit 0 1G\n", "");
    setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=512M,5=1G", 1);
    setenv("MOCK_CUDA_MPS_DEBUG", debug_path(), 1);
    load_cuda();
    cuda_ctx(0);
    CU(cu_alloc(3 * GiB, NULL), CUDA_SUCCESS);
    char *dbg = slurp(debug_path());
    CHECK(strstr(dbg, " escape\ndevice 0 " GPU0 " pinned none thread 100.0\n"));
    free(dbg);
    daemon_quit();
}

static int child(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void no_daemon_client(void)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/elsewhere", tmpdir);
    setenv("CUDA_MPS_PIPE_DIRECTORY", p, 1);
    setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "1M", 1);
    load_cuda();
    cuda_ctx(0);
    CU(cu_alloc(2 * MiB, NULL), CUDA_SUCCESS);
}

static void malformed_client(void)
{
    setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=lots", 1);
    load_cuda();
    cuda_ctx(0);
    CU(cu_alloc(GiB, NULL), CUDA_SUCCESS);
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
}

static void case_clients(void)
{
    mps_setup();
    setenv("MOCK_CUDA_MPS_DEBUG", debug_path(), 1);
    CHECK(child(no_daemon_client) == 0);
    char *dbg = slurp(debug_path());
    char want[700];
    snprintf(want, sizeof(want), "mps %s/elsewhere none\n", tmpdir);
    TEXT_EQ(dbg, want);
    free(dbg);
    daemon_start();
    mps_ok("set_default_device_pinned_mem_limit " GPU0 " 1G\n", "");
    CHECK(child(malformed_client) == 0);
    daemon_quit();
}

/* Servers: the defaults a server started with stay its own (a later default is for later
 * servers); set_device_pinned_mem_limit changes the running server for new clients; a
 * server ends with its last client. */
static int hold[2], go[2];

static void holder(void)
{
    load_cuda();
    cuda_ctx(0);
    CU(cu_alloc(GiB, NULL), CUDA_SUCCESS);
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(write(hold[1], "r", 1) == 1);
    char c;
    CHECK(read(go[0], &c, 1) == 0); /* until the parent closes */
}

static void second_client(void)
{
    load_cuda();
    cuda_ctx(0);
    CU(cu_alloc(512 * MiB, NULL), CUDA_SUCCESS);
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
}

static void later_client(void)
{
    load_cuda();
    cuda_ctx(0);
    CU(cu_alloc(2 * GiB, NULL), CUDA_SUCCESS);
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
}

static void case_servers(void)
{
    mps_setup();
    daemon_start();
    mps_ok("set_default_device_pinned_mem_limit " GPU0 " 1G\n", "");
    CHECK(pipe(hold) == 0 && pipe(go) == 0);
    fflush(NULL);
    pid_t h = fork();
    CHECK(h >= 0);
    if (h == 0) {
        close(go[1]);
        holder();
        _exit(0);
    }
    close(go[0]);
    char c, server[64], cmd[512];
    CHECK(read(hold[0], &c, 1) == 1);
    CHECK(mps("get_server_list\n", server, sizeof(server)) == 0);
    server[strcspn(server, "\n")] = 0;
    CHECK(atoi(server) > 0);
    snprintf(cmd, sizeof(cmd), "set_default_device_pinned_mem_limit " GPU0 " 2G\n"
             "set_device_pinned_mem_limit %s " GPU0 " 512M\nget_device_pinned_mem_limit %s " GPU0 "\n",
             server, server);
    mps_ok(cmd, "512M\n");
    CHECK(child(second_client) == 0);
    close(go[1]);
    int st;
    CHECK(waitpid(h, &st, 0) == h && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* The server goes with its last client. */
    char out[256] = "x";
    for (int i = 0; i < 200 && out[0]; i++) {
        CHECK(mps("get_server_list\n", out, sizeof(out)) == 0);
        if (out[0])
            usleep(10000);
    }
    TEXT_EQ(out, "");
    CHECK(child(later_client) == 0);
    daemon_quit();
}

/* nvidia-smi: recording, the compute mode through NVML, compute-policy accepted. */
static void case_smi(void)
{
    host_setup("615.20.01");
    char smi_log[600], settings[600], out[4096];
    snprintf(smi_log, sizeof(smi_log), "%s/smi.rec", tmpdir);
    snprintf(settings, sizeof(settings), "%s/settings.log", tmpdir);
    setenv("MOCK_NVIDIA_SMI_LOG", smi_log, 1);
    setenv("MOCK_NVML_SETTINGS_LOG", settings, 1);
    const char *excl[] = { "-i", GPU0, "-c", "EXCLUSIVE_PROCESS", NULL };
    CHECK(run_tool("sim/cuda/nvidia-smi", excl, NULL, out, sizeof(out)) == 0);
    TEXT_EQ(out, "Set compute mode to EXCLUSIVE_PROCESS for GPU 00000000:18:00.0.\nAll done.\n");
    const char *all[] = { "--compute-mode=DEFAULT", NULL };
    CHECK(run_tool("sim/cuda/nvidia-smi", all, NULL, out, sizeof(out)) == 0);
    TEXT_EQ(out, "Set compute mode to DEFAULT for GPU 00000000:18:00.0.\n"
                 "Set compute mode to DEFAULT for GPU 00000000:2A:00.0.\n"
                 "Set compute mode to DEFAULT for GPU 00000000:3B:00.0.\nAll done.\n");
    const char *thread[] = { "-i", "1", "-c", "1", NULL }, *none[] = { "-i", "7", "-c", "0", NULL };
    CHECK(run_tool("sim/cuda/nvidia-smi", thread, NULL, out, sizeof(out)) == 2);
    CHECK(run_tool("sim/cuda/nvidia-smi", none, NULL, out, sizeof(out)) == 6);
    const char *ts[] = { "compute-policy", "-i", GPU1, "--set-timeslice", "2", NULL };
    CHECK(run_tool("sim/cuda/nvidia-smi", ts, NULL, out, sizeof(out)) == 0);
    const char *bad[] = { "compute-policy", "--set-timeslice=9", NULL };
    CHECK(run_tool("sim/cuda/nvidia-smi", bad, NULL, out, sizeof(out)) == 2);
    char *rec = slurp(smi_log), *set = slurp(settings);
    TEXT_EQ(rec, "-i " GPU0 " -c EXCLUSIVE_PROCESS\n--compute-mode=DEFAULT\n-i 1 -c 1\n-i 7 -c 0\n"
                 "compute-policy -i " GPU1 " --set-timeslice 2\ncompute-policy --set-timeslice=9\n");
    TEXT_EQ(set, "nvmlDeviceSetComputeMode " GPU0 " 3\nnvmlDeviceSetComputeMode " GPU0 " 0\n"
                 "nvmlDeviceSetComputeMode " GPU1 " 0\nnvmlDeviceSetComputeMode " GPU2 " 0\n");
    free(rec);
    free(set);
}

/* --driver-root installs the control stand-in beside nvidia-smi. */
static void case_render(void)
{
    host_setup("615.20.01");
    char root[600], exe[700], out[1024];
    snprintf(root, sizeof(root), "%s/driver", tmpdir);
    const char *argv[] = { "--profile", getenv("MOCK_NVML_CONFIG"), "--driver-root", root, NULL };
    CHECK(run_tool("sim/nvml/nvml-sim-render", argv, NULL, out, sizeof(out)) == 0);
    snprintf(exe, sizeof(exe), "%s/usr/bin/nvidia-cuda-mps-control", root);
    struct stat st;
    CHECK(stat(exe, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0755);
    const char *h[] = { "-h", NULL };
    CHECK(run_tool(exe, h, NULL, out, sizeof(out)) == 0);
    CHECK(strstr(out, "usage: nvidia-cuda-mps-control"));
}

int main(int argc, char **argv)
{
    static const struct sim_case cases[] = {
        { "mps-record", case_record },   { "mps-limits", case_limits }, { "mps-escape", case_escape },
        { "mps-clients", case_clients }, { "mps-servers", case_servers }, { "mps-smi", case_smi },
        { "mps-render", case_render },
    };
    return sim_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
