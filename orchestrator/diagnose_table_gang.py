"""Signatures of the gang: the collective layer (coordinator, rendezvous, barriers, heartbeats, gloo/NCCL/MPI).

Data only: see orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import JAX_GH, XLA_GH, Signature, sig

GANG_SIGNATURES: tuple[Signature, ...] = (
    # --------------------------------------------------------------- collective
    sig(
        "torch-dist-store-timeout",
        "collective",
        65,
        r"DistStoreError: Timed out after \d+ seconds waiting for (clients|workers)",
        "Not every rank reached the rendezvous store: a worker did not start or failed early (its log "
        "has the cause); check MASTER_ADDR/MASTER_PORT and WORLD_SIZE, then relaunch the gang.",
        "https://github.com/OpenRLHF/OpenRLHF/issues/1040",
        "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.",
        consequence=True,
    ),
    sig(
        "torch-dist-network-timeout",
        "collective",
        60,
        r"DistNetworkError: The client socket has timed out after \d+ms while trying to connect to",
        "A rank could not reach the rendezvous address: check MASTER_ADDR/MASTER_PORT are reachable "
        "from every worker and rank 0 is up.",
        "https://github.com/vllm-project/vllm/issues/19670",
        "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while "
        "trying to connect to (172.17.0.9, 46229).",
    ),
    sig(
        "jax-coordination-deadline",
        "collective",
        65,
        r"DEADLINE_EXCEEDED: Barrier timed out|CoordinationService/RegisterTask|Barrier timed out\. (Barrier_id|Id): \w"
        r"|Coordination service agent in error status: DEADLINE_EXCEEDED",
        "Not every process reached the JAX coordinator (process 0) in time: find the missing tasks named "
        "on the following lines (they did not start, crashed first or cannot reach the coordinator "
        "address/port) and relaunch the gang.",
        "https://github.com/ayaka14732/llama-2-jax/issues/20",
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
        "PjRT_Client_Connect. Timed out task names:",
        consequence=True,
    ),
    sig(
        "jax-coordination-service-error",
        "collective",
        # The JAX/XLA coordination service (process 0's key-value store, barriers, heartbeats): a
        # key another task should have published never came, or an RPC to the service failed.
        60,
        r"GetKeyValue\(\) timed out with key|CoordinationService/(GetKeyValue|Heartbeat|Barrier|PollForError"
        r"|WaitForAllTasks|ReportErrorToService)|\[type\.googleapis\.com/tensorflow\.CoordinationServiceError"
        r"|error information from remote target /job:jax_worker",
        "A task did not publish or answer through the JAX coordination service in time: find the task "
        "that failed or never started (its own log has the cause) and relaunch the gang.",
        "https://github.com/EnzymeAD/Enzyme-JAX/issues/623",
        "Execution of replica 0 failed: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: devices=[0,1]; "
        "... and duration: 10m [type.googleapis.com/tensorflow.CoordinationServiceError='']",
        consequence=True,
    ),
    sig(
        "grpc-coordinator-unreachable",
        "collective",
        # gRPC's wording when a client cannot open its channel: in a TPU gang that is the JAX
        # coordinator or the XLA mesh master (SSH never speaks gRPC).
        40,
        r"Failed to connect to remote host: (Connection refused|Connection reset by peer|No route to host)"
        r"|failed to connect to all addresses|Failed to connect to remote server at address: grpc://",
        "A worker could not reach the gang's coordinator (JAX coordinator or XLA mesh master): check the "
        "coordinator process is up on its host and the address/port is reachable from every worker.",
        "https://github.com/marin-community/marin/issues/8244",
        "all four ranks fail: `Failed to connect to remote host: Connection refused` at `<node-ip>:32623`",
    ),
    sig(
        "torch-elastic-rendezvous-error",
        "collective",
        55,
        r"\bRendezvous(Connection|Timeout|Closed|State)Error\b",
        "torchrun's rendezvous failed (store unreachable, timed out or closed): check --rdzv_endpoint is "
        "reachable from every node and all nodes were started; the first node to fail has the cause.",
        "https://github.com/ymcui/Chinese-LLaMA-Alpaca-2/issues/274",
        "has failed to shutdown the rendezvous '3045048' due to an error of type RendezvousConnectionError.",
    ),
    sig(
        "torch-dist-network-error",
        "collective",
        # torch.distributed raises DistNetworkError only from its store/rendezvous sockets.
        50,
        r"\bDistNetworkError\b: \S|in _(env|tcp)_rendezvous_handler$|in _create_c10d_store$",
        "A rank lost or could not open its connection to the c10d store on MASTER_ADDR:MASTER_PORT: check "
        "rank 0 is up and the address is reachable from every worker, then relaunch the gang.",
        "https://github.com/pytorch/pytorch/issues/118666",
        "torch.distributed.DistNetworkError: Connection reset by peer",
    ),
    sig(
        "torch-store-barrier-timeout",
        "collective",
        60,
        r"[Tt]imed out initializing process group in store based barrier on rank"
        # TCPStore's connect timeout before it was a DistNetworkError
        r"|connect\(\) timed out\. Original timeout was \d+ ms",
        "Not every rank joined the process group in time: a worker did not start, failed first or "
        "cannot reach MASTER_ADDR:MASTER_PORT; check the first worker's log, then relaunch the gang.",
        "https://github.com/pytorch/pytorch/issues/67581",
        "RuntimeError: connect() timed out. Original timeout was 60000 ms.",
    ),
    sig(
        "torch-rpc-agent-error",
        "collective",
        45,
        r"RPC agent for \S+ encountered error",
        "torch.distributed.rpc lost a connection between workers: check every worker is up and reachable, "
        "and the shared-memory/socket limits on hosts with many workers.",
        "https://github.com/pytorch/pytorch/issues/85607",
        "[W tensorpipe_agent.cpp:916] RPC agent for 3 encountered error when sending outgoing request #0 to 0: "
        "async error on socket: Connection reset by peer",
    ),
    sig(
        "xla-rendezvous-failed",
        "collective",
        60,
        r"Failed to meet rendezvous '[^']*'",
        "Workers did not all reach an XLA rendezvous: a worker is missing or unreachable on the mesh "
        "port; check every worker runs the same program.",
        "https://github.com/pytorch/xla/issues/3129",
        "Exception in device=TPU:24: tensorflow/compiler/xla/xla_client/mesh_service.cc:364 : Failed to "
        "meet rendezvous 'test_loss': failed to connect to all addresses (14)",
        consequence=True,
    ),
    sig(
        "gloo-full-mesh-failed",
        "collective",
        60,
        r"Gloo connectFullMesh failed"
        # the same failure as a native stack: gloo connecting every pair of ranks
        r"|gloo::(rendezvous::Context::connectFullMesh|transport::tcp::Context::createAndConnectAllPairs)\(",
        "gloo could not connect every pair of ranks: check the workers can reach each other on the "
        "interface gloo picked (GLOO_SOCKET_IFNAME) and that all ranks started.",
        "https://github.com/sgl-project/sglang/issues/3226",
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
    ),
    sig(
        "jax-tpu-init-waiting-for-hosts",
        "collective",
        60,
        r"TPU backend initialization is taking more than [\d.]+ seconds\. Did you run your code on all "
        r"TPU hosts\?",
        "TPU initialisation waits for the other hosts of the slice: start the program on every worker "
        "together (one process per worker).",
        "https://github.com/google-research/t5x/issues/997",
        "UserWarning: TPU backend initialization is taking more than 60.0 seconds. Did you run your code "
        "on all TPU hosts? See https://jax.readthedocs.io/en/latest/multi_process.html for more information.",
    ),
    sig(
        "jax-controller-connect-failed",
        "collective",
        60,
        r"Failed to connect to distributed JAX controller",
        "Not every process reached the JAX coordinator: a task crashed before connecting, was never "
        "started, or cannot reach process 0's address; check every worker's log and the coordinator address.",
        XLA_GH + "xla/pjrt/distributed/client.cc",
        "Failed to connect to distributed JAX controller: waited too long for some tasks to show up. This may "
        "be due to 1) some tasks crashed earlier before connecting, 2) some tasks were never scheduled, or 3) "
        "scheduling delays.",
        consequence=True,
    ),
    sig(
        "jax-task-restarted",
        "collective",
        # the coordination service seeing a task register again while its old session lives: a process
        # restarted (or a retry's new gang reused the coordinator's port: marin-community/marin#7650)
        55,
        r"tried to connect with a different incarnation",
        "A JAX process restarted while the coordinator still held its earlier session: tear the whole gang "
        "down and relaunch it together (a fresh coordinator port per launch), not one process.",
        "https://github.com/marin-community/marin/issues/7650",
        "ABORTED: 5 unexpectedly tried to connect with a different incarnation. It has likely restarted.",
    ),
    sig(
        "jax-tasks-unhealthy",
        "collective",
        55,
        r"tasks are unhealthy \(stopped sending heartbeats\)|heartbeat timeout\. This indicates that the "
        r"remote task has failed"
        # the same timeout with the task named, in any version's wording after it
        r"|Task /job:\w+/replica:\d+/task:\d+ heartbeat timeout",
        "A peer process died and the gang shares its fate: the task named on the next lines has the real "
        "error in its own log; tear the gang down and relaunch.",
        JAX_GH + "docs/fault_tolerance.rst",
        "absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
        consequence=True,
    ),
    sig(
        "jax-distributed-fatal",
        "collective",
        50,
        r"Terminating process because the JAX distributed service detected fatal errors"
        # the coordination service's own word for the same: a task never reached the shutdown barrier
        r"|Shutdown barrier has failed",
        "The JAX distributed service aborted this process (rc 134) because of another task: read the "
        "status after 'absl::Status:' and the log of the task it names.",
        JAX_GH + "docs/fault_tolerance.rst",
        "F0926 17:26:32.075587  157988 client.h:77] Terminating process because the JAX distributed "
        "service detected fatal errors. This most likely indicates that another task died; see the other "
        "task logs for more details.",
        consequence=True,
    ),
    sig(
        "jax-coordinator-unreachable",
        "collective",
        55,
        r"Failed to send RPC to coordination service"
        # PJRT's watch on the other tasks through the service failing: the service (process 0) is gone
        r"|WatchTasksAsync failed for task \d+: UNAVAILABLE",
        "The JAX coordinator (process 0) died or is unreachable: check process 0's log first.",
        JAX_GH + "docs/fault_tolerance.rst",
        "absl::Status: UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task "
        "was preempted/died/restarted unexpectedly or this task is experiencing network issues.",
        consequence=True,
    ),
    sig(
        "jax-distributed-not-initialized",
        "collective",
        60,
        # a multi-host barrier (Orbax's checkpoint sync, multihost_utils) with no JAX coordinator:
        # jax.distributed.initialize() was never called on this gang
        r"Distributed system is not available; please initiali[sz]e it via `?jax\.distributed\.initiali[sz]e\(\)",
        "A multi-host barrier ran without the JAX coordinator: call jax.distributed.initialize() at the "
        "start of the program on every worker (orch's launch sets the coordinator address for it).",
        "https://github.com/google/orbax/issues/731",
        "ValueError: Distributed system is not available; please initialize it via `jax.distributed.initialize()` "
        "at the start of your program.",
    ),
    sig(
        "gloo-connect-failed",
        "collective",
        # gloo resolved this host to an address the peers cannot use (127.0.1.1, the wrong
        # interface) or the peer is not listening: GLOO_SOCKET_IFNAME fixes the first.
        60,
        r"gloo/transport/tcp/pair\.cc:\d+\] (connect \S+: |.*SO_ERROR: )"
        r"(Connection refused|No route to host|Connection timed out|Network is unreachable)",
        "gloo could not connect to a peer: the host resolves to a loopback or wrong interface (set "
        "GLOO_SOCKET_IFNAME to the interface the workers share) or the peer rank is not up.",
        "https://github.com/pytorch/pytorch/issues/15592",
        "  what():  [/opt/conda/conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/"
        "pair.cc:724] connect [127.0.1.1]:3210: Connection refused",
    ),
    sig(
        "gloo-peer-closed",
        "collective",
        55,
        r"gloo/transport/tcp/pair\.cc:\d+\] (Connection closed by peer|Read error .*Connection reset by peer)"
        # a peer that never answers: gloo's wait on an unbound buffer times out
        r"|gloo/transport/tcp/unbound_buffer\.cc:\d+\] Timed out waiting \d+ms for (recv|send) operation",
        "A gloo peer went away mid-collective: the rank at that address crashed or was killed first; "
        "read its log, then relaunch the gang.",
        "https://github.com/pytorch/pytorch/issues/75512",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
        "[18.25.6.30]:28048",
        consequence=True,
    ),
    sig(
        "torch-dist-store-error",
        "collective",
        50,
        r"torch\.distributed\.DistStoreError",
        "The torch.distributed store failed (a timeout or a lost rank 0): check rank 0 and that all ranks started.",
        "https://github.com/alibaba/Pai-Megatron-Patch/issues/468",
        "torch.distributed.DistStoreError: Socket Timeout",
    ),
    sig(
        "nccl-watchdog-timeout",
        "collective",
        60,
        r"Watchdog caught collective operation timeout|Some NCCL operations have failed or timed out"
        r"|ProcessGroupNCCL's watchdog got stuck"
        # the watchdog's C++ frames when only the stack of the timeout was pasted
        # (https://github.com/jpata/particleflow/issues/390)
        r"|ProcessGroupNCCL::WorkNCCL::checkTimeout\(|Exception raised from ncclCommWatchdog at",
        "A collective waited past its timeout on this rank: another rank did not reach it (crashed, "
        "stuck or diverged); find the first rank that failed, then relaunch the gang.",
        "https://github.com/XPixelGroup/BasicSR/issues/737",
        "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, "
        "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
        consequence=True,
    ),
    sig(
        "collective-mismatch",
        "collective",
        # the ranks reached different collectives (op, shape or order): torch's check under
        # TORCH_DISTRIBUTED_DEBUG=DETAIL, and NCCL's own (NVIDIA/nccl#296)
        65,
        r"Detected mismatch between collectives on ranks|NCCL WARN Mismatched collective detected"
        # Horovod's stall check (horovod/horovod#100: the ranks named their tensors differently)
        r"|This may indicate that different ranks are trying to submit different tensors",
        "The ranks called different collectives (one skipped a barrier or a broadcast, or shapes differ by "
        "rank): make every rank take the same path through the collectives, e.g. no per-rank timing or data "
        "deciding whether a rank joins.",
        "https://github.com/pytorch/pytorch/issues/78022",
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective: "
        "CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[34112], TensorDtypes=Float, "
        "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), "
        "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))",
    ),
    sig(
        "xla-rendezvous-stuck",
        "collective",
        55,
        r"This thread has been waiting for .* and may be stuck"
        r"|Expected \d+ threads to join the rendezvous, but not all of them arrived on time",
        "Not every participant reached an XLA rendezvous: a peer process or device is missing or "
        "stuck; check every process started and runs the same program.",
        "https://github.com/jax-ml/jax/issues/22740",
        "2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has been "
        "waiting for `initialize clique for rank 6; clique=devices=[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]; "
        "stream=0; run_id=724296073` for 10 seconds and may be stuck. Expected 8 threads to join the "
        "rendezvous, but not all of them arrived on time.",
        consequence=True,
    ),
    sig(
        "torch-rendezvous-store-frame",
        "collective",
        45,
        r"\bstore = TCPStore\(",
        "Creating the torch.distributed rendezvous store failed: check MASTER_ADDR/MASTER_PORT are "
        "reachable from every worker, rank 0 is up and WORLD_SIZE/RANK are right.",
        "https://github.com/yangkky/distributed_tutorial/issues/3",
        "    store = TCPStore(master_addr, master_port, world_size, start_daemon)",
    ),
    sig(
        "c10d-server-listen-failed",
        "collective",
        65,
        r"The server socket has failed to listen on any local network address"
        # the per-address warnings torch prints before giving up (or before binding another address)
        r"|\[c10d\] The server socket has failed to (listen on|bind to) \S+ \(errno: 98 - Address already in use\)"
        # torch before 1.10 raised the store's bind failure with no more words (torchelastic's error
        # file quotes it as the message)
        r"|RuntimeError: Address already in use\b",
        "The rendezvous port on the first worker is taken (a leftover process of an earlier run, or two "
        "jobs sharing MASTER_PORT): stop the leftover process or give each job its own port.",
        "https://github.com/showlab/Tune-A-Video/issues/90",
        "RuntimeError: The server socket has failed to listen on any local network address. The server socket "
        "has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
    ),
    sig(
        "nccl-system-error",
        "collective",
        55,
        r"NCCL error in: \S+, (unhandled system error|remote process exited or there was a network error)"
        r"|\bnccl(System|Remote)Error\b|Proxy Call to rank \d+ failed \((Connect|Setup)\)"
        # the same loss as NCCL's own socket layer and nccl-tests print it, across NCCL versions
        r"|NCCL WARN (Net|socketProgress) ?: (Connection closed by remote peer|Call to recv from \S+ failed)"
        r"|NCCL failure \S+ '(unhandled system error|remote process exited)",
        "NCCL lost or could not open a connection between ranks: set NCCL_SOCKET_IFNAME to the interface "
        "the workers share, check the other ranks are up (the first to fail has the cause), and relaunch.",
        "https://github.com/vllm-project/vllm/issues/10523",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
        "1333, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
    ),
    sig(
        "nccl-peer-connect-refused",
        "collective",
        # a symptom: NCCL's socket to another rank refused, retried, and in later releases given up on:
        # nothing listens at that rank's address, because it is not up, it bootstrapped on another
        # interface, or the ranks disagree on the world (facebookresearch/fairseq#1096: a world size and
        # rank per node that did not add up; ESPnet's and Stas Bekman's NCCL notes: the interface or a node)
        40,
        r"NCCL INFO Call to connect returned Connection refused, retrying"
        r"|NCCL WARN (socketStartConnect: |Net : )?Connect to \S+ failed : Connection refused",
        "An NCCL rank could not connect to another: check every node got the same world size and a distinct "
        "rank range, set NCCL_SOCKET_IFNAME to the interface the workers share, and find whether the rank "
        "at that address is up (its own log has the first failure).",
        "https://github.com/facebookresearch/fairseq/issues/1096",
        "pytorch-fairseq-worker-0:16:63 [0] NCCL INFO Call to connect returned Connection refused, retrying",
        consequence=True,
    ),
    sig(
        "ray-node-marked-dead",
        "collective",
        # a symptom: the cluster lost a member (its raylet crashed, was OOM-killed or preempted, or
        # was too busy to answer); the node's own log has the cause
        50,
        r"has been marked dead because the (detector|monitor) has missed too many heartbeats from it",
        "The Ray cluster declared a node dead after missed heartbeats: find what happened on that node "
        "(its raylet log, `dmesg` for the OOM killer, preemption) and relaunch the gang.",
        "https://github.com/ray-project/ray/issues/27710",
        "The node with node id: c118acd15dee467500f3fb92b837db8e73d4e868e7e835585ace6f29 and address: "
        "10.0.3.192 and node name: 10.0.3.192 has been marked dead because the detector has missed too many "
        "heartbeats from it.",
        consequence=True,
    ),
    sig(
        "ray-node-startup-timeout",
        "collective",
        # a symptom: this node's raylet never registered with the head (GCS): the head's address is
        # wrong or not routable from here, or its ports are closed; the raylet log has the cause
        40,
        r"The current node timed out during startup|The current node has not been updated within \d+ seconds",
        "This Ray node could not join the cluster: check the address it registers with is routable from "
        "the head (node IP, network interface), the head's ports are open, and relaunch the gang.",
        "https://github.com/aws-samples/aws-do-eks/pull/49",
        "Exception: The current node timed out during startup. This could happen because some of the Ray "
        "processes failed to startup.",
        consequence=True,
    ),
    sig(
        "pmap-sees-only-local-devices",
        "collective",
        # a symptom: the program wants the slice's devices and sees only this host's several (the
        # hosts did not start together as one gang); one device is a runtime fallback instead
        45,
        r"Cannot replicate across \d+ replicas because only ([2-9]|\d\d+) local devices are available",
        "The program expects every host's devices but sees only this host's: start it on every worker of "
        "the slice at once (the fleet's launch does) and initialise the distributed runtime before use.",
        "https://github.com/jax-ml/jax/issues/3004",
        "Cannot replicate across 32 replicas because only 8 local devices are available.",
    ),
    sig(
        "nccl-no-socket-interface",
        "collective",
        60,
        # NCCL's bootstrap found no usable IP interface (none up, or NCCL_SOCKET_IFNAME naming one the
        # host lacks): its own words across releases, and the unset address it then tries to connect to
        r"\bBootstrap : no (socket|NCCL_SOCKET_IFNAME) interface found|NET/Socket : no interface found"
        r"|ncclSocketInit: connecting to address .{0,60}with family \d+ is neither AF_INET\(2\) nor AF_INET6"
        r"|socket\.h:\d+ (NCCL )?WARN Socket creation failed : Address family not supported by protocol",
        "NCCL found no network interface to bootstrap the gang on: set NCCL_SOCKET_IFNAME to an interface "
        "every worker has (`ip addr`), and check the hosts agree on IPv4/IPv6.",
        "https://github.com/NVIDIA/nccl/issues/1837",
        "ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)",
    ),
    sig(
        "c10d-store-connect-timeout",
        "collective",
        60,
        r"\[c10d\] The client socket has timed out after \d+m?s while trying to connect to"
        r"|RendezvousConnectionError: The connection to the C10d store has failed",
        "A node could not reach the c10d rendezvous endpoint: check --rdzv_endpoint/MASTER_ADDR is "
        "reachable from every node (firewall, interface) and that the node hosting it is up.",
        "https://github.com/pytorch/pytorch/issues/76367",
        "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to connect to (IP1, 2222).",
    ),
    sig(
        "c10d-store-connect-failed",
        "collective",
        # c10d logs each failed connect to the store as a warning while it retries, so the line is
        # the weakest confident answer: any other signature in the log outranks it. Only a connect
        # that timed out (an address nothing answers at) and c10d's final error are the class: a
        # refused connect is also what healthy gangs log while rank 0's store starts, and the
        # IPv6 fallback's "Address family not supported" warnings are harmless.
        25,
        r"\[c10d\] The client socket has failed to connect to (\S+ \(errno: 110 - Connection timed out\)"
        r"|any network address of )",
        "A node could not connect to the c10d store at MASTER_ADDR:MASTER_PORT (--rdzv_endpoint): check "
        "the address names the node hosting rank 0, that it is up, and that the port is reachable.",
        "https://github.com/hiyouga/LlamaFactory/issues/3715",
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to [::ffff:255.255.0.0]:29500 "
        "(errno: 110 - Connection timed out).",
    ),
    sig(
        "xla-mesh-connect-check-failed",
        "collective",
        60,
        r"mesh_service\.cc:\d+ : Check failed: impl_->channel|Failed to connect to client mesh master",
        "A torch_xla (XRT) replica could not connect to the mesh service in time: the master replica "
        "died or is unreachable; check the first replica's log and the network between workers.",
        "https://github.com/pytorch/xla/issues/4115",
        "RuntimeError: tensorflow/compiler/xla/xla_client/mesh_service.cc:329 : Check failed: "
        "impl_->channel->WaitForConnected( std::chrono::system_clock::now() + std::chrono::seconds(connect_w",
    ),
    sig(
        "jax-wait-at-barrier",
        "collective",
        40,
        r"\bwait_at_barrier\(",
        "A JAX barrier between processes failed: a peer crashed or was not launched, or is slower than "
        "the barrier timeout; check every worker's log and the timeout.",
        "https://github.com/marin-community/marin/issues/1902",
        '    client.wait_at_barrier(f"multihost_broadcast_sync{_sync_counter}", timeout_in_ms=int(timeout * 1000.0))',
        consequence=True,
    ),
    sig(
        "mpi-shared-memory-copy-refused",
        "collective",
        # Open MPI's shared-memory transport between ranks on one host copying through the kernel's
        # cross-memory attach, which a container without ptrace rights refuses: every exchange fails
        # (deepinsight/insightface#1284: Horovod in Docker, fixed by --privileged; open-mpi/ompi#4948)
        55,
        r"\bRead -1, expected \d+, errno = ?1\s*$",
        "Open MPI's shared-memory transport between the ranks on a host was refused by the container: set "
        "OMPI_MCA_btl_vader_single_copy_mechanism=none in the gang's environment (or give the container "
        "the ptrace capability), then relaunch the whole gang.",
        "https://github.com/open-mpi/ompi/issues/4948",
        "[1,5]<stderr>:[8311b4012d34:153937] Read -1, expected 131072, errno = 1",
    ),
    sig(
        "megascale-hang",
        "collective",
        60,
        # the multislice (DCN) runtime's hang detector
        r"Megascale detects a hang",
        "The multislice runtime saw a collective across slices stop progressing: find the slice or worker "
        "that failed or stalled first (its own log), then relaunch the whole gang.",
        "https://github.com/AI-Hypercomputer/maxtext/pull/2490",
        "Megascale detects a hang but cannot determine the root cause. Please inspect the full digest below.",
    ),
)
