"""Signatures of reaching the worker and owning its chip: the transport and device-ownership layers.

Data only: see orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import XLA_GH, Signature, sig

REACH_SIGNATURES: tuple[Signature, ...] = (
    # ---------------------------------------------------------------- transport
    sig(
        "ssh-host-key-changed",
        "transport",
        95,
        r"REMOTE HOST IDENTIFICATION HAS CHANGED|HOST KEY CHANGED for \S+",
        "The worker's host key changed: if the worker was really rebuilt, remove the old key "
        "(`ssh-keygen -f KNOWN_HOSTS -R HOST`) and reconnect; otherwise stop and find out why.",
        "https://github.com/5calV/BytesOfProgress/issues/24",
        "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
    ),
    sig(
        "ssh-host-key-verification-failed",
        "transport",
        85,
        r"Host key verification failed\."
        # OpenSSH asking to trust a key it has never seen (in a batch run nobody answers, and the
        # connection fails), and asyncssh refusing the same key (ronf/asyncssh#361)
        r"|The authenticity of host '[^']*' can't be established|\bHostKeyNotVerifiable\b|Host key is not trusted",
        "The worker's host key is unknown or differs from known_hosts: verify its fingerprint and add "
        "it to the fleet's known_hosts; never switch off strict checking.",
        "https://github.com/5calV/BytesOfProgress/issues/24",
        "Host key verification failed.",
    ),
    sig(
        "ssh-permission-denied",
        "transport",
        75,
        r"Permission denied \((publickey|password|keyboard-interactive|gssapi)[^)]*\)"
        r"|AuthenticationException: Authentication failed"
        r"|paramiko\.transport\W{0,3}(?:[A-Z]+ )?Authentication \([\w-]+\) failed"
        # the same refusal seen from the key's side, or after too many keys were offered
        r"|Too many authentication failures"
        # OpenSSH's password prompt refusing the password; paramiko when the server does not offer the method
        r"|(^|\s)Permission denied, please try again\.|\bBad authentication type\b"
        r"|(sign_and_send_pubkey|send_pubkey_test): no mutual signature (supported|algorithm)"
        r"|UNPROTECTED PRIVATE KEY FILE|Load key \"[^\"]*\": (bad permissions|invalid format)"
        # paramiko's refusal of a key with a passphrase, also as Ansible reworded it (ansible/ansible#446)
        r"|(PasswordRequiredException|FAILED): [Pp]rivate key file is encrypted|SSHException: No existing session"
        r"|SSHException: No authentication methods available|Bad owner or permissions on \S*\.ssh/"
        # the worker's sshd log names the refused user
        r"|sshd\[\d+\]: (Invalid user \S+ +from|Failed publickey for (invalid user )?\S+ from)"
        # sshd's own lines without the syslog prefix (Win32-OpenSSH's log, journalctl -o cat); "Failed none"
        # is every client's first probe, not a refusal
        r"|maximum authentication attempts exceeded for (invalid user )?\S+ from \S+"
        r"|Failed (password|publickey|keyboard-interactive(/pam)?) for (invalid user )?\S+ from \S+ port \d+ ssh2"
        # asyncssh's refusal, also as IPython heads its traceback (dask/dask#6356: a host, localhost
        # included, without the key the cluster logs in with)
        r"|\basyncssh\.(misc\.)?PermissionDenied(: |$)|^PermissionDenied +Traceback \(most recent call last\)",
        "The worker refused the login, or the key could not be offered: check the fleet's ssh user and key "
        "for this worker (authorized_keys on the worker; key path, permissions, format and agent on this side).",
        "https://github.com/openai/tart/issues/1135",
        "admin@192.168.64.15: Permission denied (publickey,password,keyboard-interactive).",
    ),
    sig(
        "ssh-agent-unreachable",
        "transport",
        # a symptom: a setup script's ssh-add without an agent may be harmless when a key file is
        # given, so any more specific failure in the log outranks it
        30,
        # the SSH client was told to use an agent that is not there (no SSH_AUTH_SOCK, a dead socket
        # after a nested login): paramiko's and OpenSSH's wordings
        r"AuthenticationException: Unable to connect to SSH agent"
        r"|Could not open a connection to your authentication agent"
        r"|Error connecting to agent: (No such file or directory|Connection refused)",
        "The SSH client could not reach its key agent (SSH_AUTH_SOCK unset or stale, e.g. under a nested "
        "login): give the fleet an explicit key file for this worker, or start the agent and add the key.",
        "https://github.com/aws/aws-parallelcluster/pull/1224",
        "paramiko.ssh_exception.AuthenticationException: Unable to connect to SSH agent",
    ),
    sig(
        "ssh-dsa-key-rejected",
        "transport",
        70,
        # cryptography refuses the parameters of a DSA key (the login key, or a DSA host key in the
        # exchange) that paramiko hands it: the key type, not the network, fails the login
        r"\b(q must be exactly 160, 224,? or 256|p must be exactly 1024, 2048,? (or 3072|3072,? or 4096)) bits long",
        "paramiko could not use a DSA (ssh-dss) key: that key type is obsolete; give the fleet an "
        "ed25519 (or RSA) key for this worker, and check the ssh user is the right one.",
        "https://github.com/fabric/fabric/issues/2182",
        "Unknown exception: q must be exactly 160, 224, or 256 bits long",
    ),
    sig(
        "ssh-algorithm-negotiation",
        "transport",
        75,
        r"Unable to negotiate with \S+( port \d+)?: no matching (host key type|key exchange method|cipher|MAC) found"
        # the same mismatch as the other SSH stacks word it: paramiko (kex, host key, cipher, MAC),
        # libssh, Go's x/crypto/ssh, libssh2
        r"|Incompatible ssh (peer|server) \((no acceptable (kex algorithm|host key|ciphers|macs|compression)"
        r"|can't match requested host key type)\)"
        r"|kex error ?: no match for method|ssh: handshake failed: ssh: no common algorithm for"
        r"|Unable to exchange encryption keys"
        # the worker's sshd refusing the client's key type or signature algorithm (OpenSSH 8.8+ drops ssh-rsa)
        r"|userauth_pubkey: (key type|signature algorithm) \S+ not in Pubkey(AcceptedKeyTypes|AcceptedAlgorithms)",
        "Client and worker share no SSH algorithm (a newer OpenSSH dropped ssh-rsa or an old KEX): give "
        "the worker an ed25519 host key, or allow the algorithm for that host only.",
        "https://github.com/gokrazy/breakglass/issues/9",
        "Unable to negotiate with 100.77.11.58 port 22: no matching host key type found. Their offer: ssh-rsa",
    ),
    sig(
        "paramiko-host-key-unknown",
        "transport",
        80,
        r"SSHException: Server '[^']+' not found in known_hosts|BadHostKeyException: Host key for server",
        "paramiko does not know (or distrusts) the worker's host key: add its verified key to the "
        "fleet's known_hosts, in the [host]:port form when the port is not 22.",
        "https://github.com/paramiko/paramiko/issues/2464",
        "paramiko.ssh_exception.SSHException: Server '[192.168.77.1]:22121' not found in known_hosts",
    ),
    sig(
        "ssh-connection-refused",
        "transport",
        60,
        r"connect to host \S+ port \d+: Connection refused"
        r"|connection to \S+ refused \(sshd not running\?\)|dial tcp \S*:22: connect: connection refused"
        r"|NoValidConnectionsError: \[Errno None\] Unable to connect to port \d+ on \S+"
        # paramiko's message alone (wrapped or translated by the calling tool)
        r"|Unable to connect to port \d+ on \[?[\w.:-]+\]?"
        # Fabric 1.x
        r"|Low level socket error connecting to host \S+ on port \d+: Connection refused",
        "Nothing listens on the worker's SSH port: start sshd on the worker or fix the port in fleet.yaml.",
        "https://github.com/rastasheep/ubuntu-sshd/issues/26",
        "ssh: connect to host localhost port 22: Connection refused",
    ),
    sig(
        "ssh-connection-timed-out",
        "transport",
        60,
        r"connect to host \S+ port \d+: (Connection|Operation) timed out"
        r"|connect to \S+ timed out after [\d.]+s|no SSH banner from \S+ within"
        r"|dial tcp \S*:22: (i/o timeout|connect: no route to host)"
        # the same timeout reported without ssh's own prefix (aws/aws-cli#4189)
        r"|\bport 22: (Connection|Operation) timed out",
        "The worker did not answer within the timeout: it is down, paused, overloaded or firewalled; "
        "check it from its console or cloud status and re-test with `orch exec -- true`.",
        "https://github.com/googledatalab/datalab/issues/2116",
        "ssh: connect to host 35.237.76.73 port 22: Connection timed out",
    ),
    sig(
        "ssh-no-route",
        "transport",
        60,
        r"connect to host \S+ port \d+: (No route to host|Network is unreachable)",
        "The controller has no network path to the worker: the worker is down or on another network, "
        "or a firewall rejects the route; check its address and that it answers from this host.",
        "https://github.com/BAAI-WuDao/EVA/issues/3",
        "ssh: connect to host 175.24.121.148 port 22: No route to host",
    ),
    sig(
        "ssh-connection-dropped",
        "transport",
        50,
        r"Connection to \S+ closed by remote host|packet_write_wait: Connection to \S+ port \d+: Broken pipe"
        r"|client_loop: send disconnect: Broken pipe|^Write failed: Broken pipe"
        r"|(packet_write_wait|ssh_dispatch_run_fatal): Connection to \S+ port \d+: "
        r"(Broken pipe|Connection reset by peer|Operation timed out)"
        r"|^Connection (closed|reset) by \S+ port \d+"
        # asyncssh's wording, also when the server dropped the connection before login (ronf/asyncssh#55:
        # sshd's MaxStartups refusing concurrent unauthenticated connections)
        r"|\b(DisconnectError|ConnectionLost)\W+(Disconnect Error: )?Connection lost",
        "The SSH session to the worker dropped mid-command: check the worker is still up (preemption, "
        "reboot, OOM of sshd) and the network path; the remote command may still be running.",
        "https://github.com/pytorch/xla/issues/3129",
        "packet_write_wait: Connection to 120.192.110.58 port 22: Broken pipe",
    ),
    sig(
        "ssh-banner-not-read",
        "transport",
        70,
        r"Error reading SSH protocol banner|Connection timed out during banner exchange"
        # the same failure as a traceback: paramiko waited for the banner and got EOF or a timeout
        r"|paramiko/transport\.py\", line \d+, in _check_banner",
        "The SSH handshake got no (or no SSH) banner: the worker's sshd is overloaded, still starting, "
        "or something else answers on the port; check sshd on the worker and raise the banner timeout.",
        "https://github.com/fabric/fabric/issues/2157",
        "Exception: Error reading SSH protocol banner",
    ),
    sig(
        "ssh-kex-closed",
        "transport",
        60,
        r"(kex|ssh)_exchange_identification: (Connection closed by remote host|read: Connection reset by peer)"
        # the worker's own sshd log of that refusal (openssh-portable sshd.c; scylladb/scylla-cluster-tests#2005)
        r"|drop connection #\d+ from \S+ on \S+ past MaxStartups",
        "The worker closed the connection before the key exchange: sshd refused it (MaxStartups, "
        "firewall, IAP/bastion rules, a tunnel that cannot reach port 22); check the path and sshd's log.",
        "https://github.com/pytorch/xla/issues/2665",
        "kex_exchange_identification: Connection closed by remote host",
    ),
    sig(
        "ssh-client-frame",
        "transport",
        45,
        # A traceback through the SSH client's connect or login: whatever the last line says (a socket
        # error, a refused key, an unknown host key), the worker was not reached.
        r"paramiko[/\\](client|transport)\.py\", line \d+, in (_auth|connect|auth_\w+|start_client)\b"
        # Fabric opens lazily: Connection.open, or its `opens` decorator before run/put/get
        r"|fabric[/\\]connection\.py\", line \d+, in (open|opens|open_gateway)$",
        "The traceback ends in the SSH client's connection or login to the worker: the last lines say why "
        "(refused credentials, unreachable port, unknown host key); check the fleet's ssh settings for it.",
        "https://github.com/paramiko/paramiko/issues/2316",
        'File "D:\\23.10.17\\smartIDC\\python39\\lib\\site-packages\\paramiko\\client.py", line 766, in _auth',
    ),
    sig(
        "nccl-ib-completion-error",
        "transport",
        50,
        # NCCL's InfiniBand/RoCE transport getting a failed work completion from the peer's side: the
        # fabric between the hosts (MTU differing between hosts, a flapping link, retry exceeded;
        # NVIDIA/nccl#1524), not the gang's logic
        r"NET/IB ?: Got completion (from peer \S+ )?with (error|status)[= ]?\d+",
        "The RDMA network between the hosts failed a transfer: check the link and the NICs' settings "
        "on both hosts (MTU, the same on every host; `ibstat`, port counters), and NCCL_IB_HCA.",
        "https://github.com/NVIDIA/nccl/issues/1524",
        "ubuntu20-server-2:94639:94652 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        "192.168.1.2<57888> with status=5 opcode=1 len=0 vendor err 249 (Recv) localGid fe80::e61d:2dff:fef2:9c94 "
        "remoteGidsfe80::e61d:2dff:fef2:9fa0",
    ),
    sig(
        "gloo-hostname-unresolved",
        "transport",
        70,
        # gloo resolves this host's own name to pick its interface; a name with no usable address
        # (a container hostname, no /etc/hosts entry) fails before any peer is contacted
        r"gloo/transport/tcp/device\.cc:\d+\].*Unable to find address for",
        "gloo could not resolve this host's name to an address: give the worker a resolvable hostname "
        "(/etc/hosts or DNS) or set GLOO_SOCKET_IFNAME to the interface the workers share.",
        "https://github.com/msr-fiddle/pipedream/issues/32",
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:127] rp != nullptr. "
        "Unable to find address for: dgx-1.ai",
    ),
    sig(
        "ssh-resolve-hostname",
        "transport",
        65,
        r"ssh: Could not resolve hostname"
        # Fabric 1.x's wording of the same
        r"|Name lookup failed for \S+",
        "The worker's address does not resolve: fix the host in fleet.yaml (a typo, a nickname, an empty "
        "value) or the controller's DNS.",
        "https://github.com/mfat/sshpilot/issues/483",
        "ssh: Could not resolve hostname router: Name or service not known",
    ),
    sig(
        "host-name-unresolved",
        "transport",
        # a symptom: Python's resolver failing on a name, most often the worker's in an SSH client
        # (paramiko, Fabric, a tool's own socket); a gang's rendezvous names its own error first
        40,
        r"\bgaierror: \[Errno (-2|-3|-5|7|8|11001|11004)\] ?(Name or service not known|Temporary failure in name "
        r"resolution|No address associated with (hostname|nodename)|nodename nor servname provided, or not known"
        r"|getaddrinfo failed|The requested name is valid)",
        "The worker's host name does not resolve from this host: check the address in fleet.yaml (a typo, "
        "user@ or a port inside the host field) and this host's DNS or /etc/hosts.",
        "https://github.com/aker-gateway/Aker/issues/46",
        "socket.gaierror: [Errno -2] Name or service not known",
    ),
    sig(
        "gcp-api-scope-denied",
        "transport",
        # Google Cloud's API refusing the caller's OAuth token for lack of a scope: the VM the request
        # comes from was created without the scope (or the account lacks the role) for the TPU API
        # (tensorflow/tpu#596; the same 403 from any Cloud API: cloudyr/googleComputeEngineR#155); and
        # the container registry refusing a push with no credentials at all, when the launcher's host
        # never set up docker's credential helper (AI-Hypercomputer/maxtext#1557)
        55,
        r"Request had insufficient authentication scopes|\bACCESS_TOKEN_SCOPE_INSUFFICIENT\b"
        r"|denied: Unauthenticated request|denied: Permission \\?\"artifactregistry\.repositories\.\w+\\?\" denied",
        "The controller's Google credentials lack the scope or role for the API it called (a VM created "
        "without the cloud-platform scope, an account without the TPU roles, docker without `gcloud auth "
        "configure-docker`): give the VM's service account the scope, or run as an account that has it.",
        "https://github.com/tensorflow/tpu/issues/596",
        "Error: API returned: Insufficient Permission: Request had insufficient authentication scopes.",
    ),
    sig(
        "remote-endpoint-unreachable",
        "transport",
        # a worker that cannot open a connection to a remote it needs: git or curl reaching a Git host or an
        # index (YoshitakaMo/localcolabfold#291: port 443 blocked at the site; the fix was the network), a
        # Ray node reaching its head's Redis port (ray-project/ray#12153: the ports closed between nodes).
        # Not a fetch refused: something answered there, and nothing says the path is at fault.
        40,
        r"Failed to connect to \S+ port \d+( after \d+ ms)?: (Could not connect to server|Couldn't connect to "
        r"server|Connection timed out|Timed out|No route to host|Network is unreachable)"
        r"|Could not establish connection to redis \S+:\d+",
        "This host could not open a connection to a remote it needs (a Git host, an index, the cluster's "
        "head): the network path or a firewall blocks that port. Open it between the hosts, or give the "
        "workers no need for it: the bundle orch pushes carries the wheels, so an install needs no egress.",
        "https://github.com/YoshitakaMo/localcolabfold/issues/291",
        "fatal: unable to access 'https://github.com/sokrypton/ColabFold/': Failed to connect to github.com "
        "port 443 after 127238 ms: Could not connect to server",
    ),
    sig(
        "hub-credentials-rejected",
        "transport",
        # the Hugging Face Hub refusing a worker's stored token (expired or revoked) while a job loads a
        # dataset or model: the request reached the Hub and came back 401 (huggingface/huggingface_hub#1932:
        # fixed by logging in again)
        35,
        r"Couldn't reach https://huggingface\.co/\S+ \((error 401|ConnectionError\('Unauthorized for URL)"
        r"|401 Client Error: Unauthorized for url: https://huggingface\.co/"
        r"|^Invalid credentials in Authorization header$",
        "The Hub rejected the worker's credentials: log in again on that worker (`huggingface-cli login`) "
        "or pass a valid HF_TOKEN in the job's environment; a gated repository also needs its access granted.",
        "https://github.com/huggingface/huggingface_hub/issues/1932",
        "ConnectionError: Couldn't reach https://huggingface.co/datasets/.../README.md (error 401)",
    ),
    sig(
        "ssh-key-unreadable",
        "transport",
        70,
        # the SSH client could not read the private key it was given or found (a format its release
        # does not know, e.g. the OpenSSH format under an old paramiko, or the wrong file): paramiko's
        # and libssh2's wordings
        r"\bnot a valid (RSA|DSA|EC|ECDSA|OPENSSH|Ed25519) private key file|\bencountered (RSA|DSA|EC|OPENSSH) key, "
        r"expected (RSA|DSA|EC|OPENSSH) key|SSHException: Invalid key\b"
        r"|Unable to extract public key from private key file|invalid/unrecognized private key file format"
        # Node's ssh2, under a launcher's remote mode (microsoft/nni#2400: an OpenSSH-format key, fixed as PEM)
        r"|^\s*(Error: )?Unsupported key format\.?\s*$",
        "The SSH client could not read the private key: give the fleet a key file in a format this client "
        "reads (an ed25519 key, or `ssh-keygen -p -m PEM` for an old paramiko) and check the path names the "
        "key the worker expects.",
        "https://github.com/Xpra-org/xpra/issues/2307",
        "paramiko.ssh_exception.SSHException: not a valid RSA private key file",
    ),
    sig(
        "gcloud-ssh-failed",
        "transport",
        55,
        # ssh itself fails with 255; any other code is the remote command's own exit status.
        r"ERROR: \(gcloud\.compute\.[\w.-]*ssh\)(?! \[\S+\] exited with return code \[(?!255\])\d+\])"
        r"|ERROR: \(gcloud\.compute\.[\w.-]*scp\)|ERROR: \(gcloud\.compute\.start-iap-tunnel\)",
        "gcloud could not open the SSH session to the worker (the reason is on the lines before: "
        "firewall, IAP, project or key): check `gcloud compute tpus tpu-vm ssh` by hand.",
        "https://github.com/tensorflow/tpu/issues/233",
        "It gives: ERROR: (gcloud.compute.ssh) [/usr/bin/ssh] exited with return code [255].",
    ),
    sig(
        "ssh2-session-error",
        "transport",
        # libssh2's bindings (ssh2-python, and parallel-ssh's native clients over it) failing the
        # session itself: handshake, key exchange, socket or login; a numeric code its release does not
        # name is usually a key exchange the bundled libssh2 cannot do
        55,
        r"^\s*ssh2\.exceptions\.(\w+Error|Timeout)(: |$)",
        "The SSH session to the worker failed in libssh2 (handshake, key exchange, socket or login): "
        "check the worker's sshd accepts this client's algorithms (a newer ssh2-python bundles a newer "
        "libssh2) and that plain `ssh` reaches the host.",
        "https://github.com/ParallelSSH/ssh2-python/issues/172",
        "ssh2.exceptions.UnknownError: ('Error code %s not known', -5)",
    ),
    # --------------------------------------------------------- device-ownership
    sig(
        "tpu-in-use-by-pid",
        "device-ownership",
        95,
        r"The TPU is already in use by process with pid\b",
        "The named process holds the chip: inspect it (`ps -o pid,cmd -p PID`), stop it if it is an "
        "orphan of an earlier run, then retry; one chip serves one process.",
        "https://github.com/jax-ml/jax/issues/22070",
        "INFO:2024-06-25 00:34:55,142:jax._src.xla_bridge:889: Unable to initialize backend 'tpu': "
        "ABORTED: The TPU is already in use by process with pid 176028. Not attempting to load "
        "libtpu.so in this process.",
    ),
    sig(
        "libtpu-lockfile-error",
        "device-ownership",
        95,
        r"Internal error when accessing libtpu multi-process lockfile",
        "/tmp/libtpu_lockfile is locked by a process libtpu could not identify: check /proc/locks for "
        "its holder and stop it; delete the file only when no process holds it (a stale file is harmless).",
        XLA_GH + "xla/stream_executor/tpu/tpu_initializer_helper.cc",
        'ABORTED: Internal error when accessing libtpu multi-process lockfile. Run "$ sudo rm /tmp/libtpu_lockfile".',
    ),
    sig(
        "tpu-in-use-other-user",
        "device-ownership",
        92,
        r"The TPU is already in use by another process probably owned by another user"
        r"|The TPU is already in use or the lock file is stale",
        "A process of another user (or a stale lock) holds the chip: `sudo lsof -w /dev/accel0` "
        "names it; stop it, and remove the lockfile only when nothing holds it.",
        XLA_GH + "xla/stream_executor/tpu/tpu_initializer_helper.cc",
        "The TPU is already in use by another process probably owned by another user. Run "
        '"$ sudo lsof -w /dev/accel0" to figure out which process is using the TPU. If you still get '
        'this message, run "$ sudo rm /tmp/libtpu_lockfile".',
    ),
    sig(
        "libtpu-already-in-use",
        "device-ownership",
        90,
        # newer libtpu names the holder's pid (jax-ml/jax#11146)
        r"libtpu\.so (is )?already in used? by (another process|process with pid \d+)",
        "Another process has libtpu loaded on this host: find it (`sudo lsof -w /dev/accel0`) and stop "
        "it if it is an orphan; this process silently runs without the TPU otherwise.",
        "https://github.com/jax-ml/jax/issues/10192",
        "I0000 00:00:1649423660.053391 1924758 f236.cc:165] libtpu.so already in use by another process "
        'probably owned by another user. Run "$ sudo lsof -w /dev/accel0" to figure out which process '
        "is using the TPU. Not attempting to load libtpu.so in this process.",
    ),
    sig(
        "tpu-vfio-busy",
        "device-ownership",
        90,
        r"open\(/dev/(vfio/\w+|accel\d+)\): Device or resource busy|Couldn't open iommu group /dev/vfio/\d+"
        # the same EBUSY as other VFIO users print it (DPDK EAL "Cannot open /dev/vfio/151: ...")
        r"|/dev/(vfio/\w+|accel\d+)\b.{0,20}Device or resource busy",
        "Another process has the TPU's VFIO device open: `fuser -v /dev/vfio/*` names it; stop the "
        "orphan (often a child process of an earlier run) and retry.",
        "https://github.com/marin-community/marin/issues/2618",
        "Failed to initialize TPU system with error: FAILED_PRECONDITION: open(/dev/vfio/0): Device or "
        "resource busy: Device or resource busy; Couldn't open iommu group /dev/vfio/0",
    ),
    sig(
        "gpu-memory-held-by-other-process",
        "device-ownership",
        # torch's out-of-memory message lists every other process with memory on the device ("Process N
        # has ... memory in use"; its own as "this process has"): one holding tens of GiB is a co-tenant,
        # often a crashed run's leftover (rwth-i6/returnn#1649: 71.62 GiB held by the previous run). Only
        # when torch also found its own process: in a container whose PID namespace is not the driver's,
        # torch cannot tell itself apart and lists its own memory as "Process N" (NVIDIA/nvidia-docker#179)
        85,
        r"CUDA out of memory\..* Process \d+ has \d{2,}(\.\d+)? GiB memory in use\..* this process has ",
        "Another process holds much of this GPU's memory (a previous run that did not exit, or another "
        "job): find it with `nvidia-smi` and end it before relaunching, or schedule one job per device.",
        "https://github.com/rwth-i6/returnn/issues/1649",
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 290.00 MiB. GPU 0 has a total capacity of 93.00 "
        "GiB of which 134.94 MiB is free. Process 118636 has 71.62 GiB memory in use. Including non-PyTorch "
        "memory, this process has 21.24 GiB memory in use.",
    ),
    sig(
        "tpu-accel-open-denied",
        "device-ownership",
        80,
        r"Couldn't open device: /dev/accel\d+ \(Operation not permitted\)"
        r"|PERMISSION_DENIED: open\(/dev/accel\d+\)|open\(/dev/accel\d+\): Operation not permitted",
        "The TPU device node could not be opened: a dangling process may still hold it, or this user "
        "lacks permission; check `lsof -w /dev/accel0` and the device node's owner.",
        "https://github.com/pytorch/xla/issues/3165",
        "Invalid argument: Invalid fd: -1; Couldn't open device: /dev/accel0 (Operation not permitted); "
        "Unable to create Node RegisterInterface for node 0",
    ),
    sig(
        "ssh-tool-connect-failed",
        "transport",
        65,
        # a fleet tool's own words for an SSH connection or tunnel to a host that did not come up
        # (dstackai/dstack#471: the container's sshd not started yet; #1994: the key refused)
        r"\b(Can't|Cannot|Could not|Couldn't|Failed to|Unable to) (establish|open|create|start) (an? |the )?SSH tunnel"
        r"|\bSSH tunnel failed\b|\bSSH connection to (the )?\S+ (with keys \[[^\]]*\] )?(was unsuccessful|failed)\b",
        "The tool could not open its SSH connection or tunnel to the host: check that sshd runs there "
        "(and is up before the tool connects), that the key offered is authorised, and the address and port.",
        "https://github.com/dstackai/dstack/issues/471",
        "ERROR Can't establish SSH tunnel with the container",
    ),
    sig(
        "ssh-port-forward-failed",
        "transport",
        65,
        # OpenSSH could not set up a forwarded port: the port is taken, often by a stale tunnel of an
        # earlier session (dstackai/dstack#1213)
        r"\bforwarding failed for listen port \d+"
        r"|channel_setup_fwd_listener_tcpip: cannot listen to port: \d+|Could not request local forwarding"
        # the server (or a bastion on the way) refuses the forwarded channel
        # (microsoft/vscode-remote-release#10062)
        r"|channel \d+: open failed: administratively prohibited",
        "SSH could not forward the tunnel's port: another process (often a stale ssh tunnel from an earlier "
        "session) holds it, or the server or a bastion forbids forwarding (AllowTcpForwarding, the "
        "bastion's policy: 'administratively prohibited'); free the port or allow forwarding.",
        "https://github.com/dstackai/dstack/issues/1213",
        "Failed to connect to gateway 34.88.240.248: Error: remote port forwarding failed for listen port 8001",
    ),
    sig(
        "remote-launcher-unreachable",
        "transport",
        40,
        # a parallel launcher's remote shell could not reach a node (pdsh/pdcp's rcmd module, Open MPI's
        # daemons started over ssh, MVAPICH's mpirun_rsh, MPICH's hydra proxies); the reason, when
        # given, is on another line (pdsh's ssh exiting 255 is ssh-launcher-exit-255)
        r"\bpd(sh|cp)@\S+: \S+: (rcmd: |connect: )"
        r"|ORTE was unable to reliably start one or more daemons"
        r"|\[\S+:mpirun_rsh\]\[connect_socket\] could not connect to"
        r"|HYDU_sock_connect \(\S+\): unable to (connect|get host address)",
        "The launcher could not start its processes on a node over the remote shell: check that the "
        "node answers ssh from the launching host without a prompt (key, known_hosts, name "
        "resolution) and that the launcher uses ssh, not rsh (pdsh -R ssh).",
        "https://github.com/chaos/pdsh/issues/127",
        "pdcp@localhost: host: rcmd: socket: Permission denied",
    ),
    sig(
        "ansible-ssh-unreachable",
        "transport",
        80,
        # Ansible's wording for every SSH-level failure to a host (refused key, closed or timed-out
        # connection, unresolved name); the reason, when given, follows the colon.
        r"Failed to connect to the host via ssh\b",
        "The control host could not open SSH to the worker (the reason follows the message): check the "
        "key offered, the address and that sshd answers on the worker.",
        "https://github.com/ansible/ansible/issues/21431",
        'fatal: [96.119.XXX.XXX]: UNREACHABLE! => {"changed": false, "msg": "Failed to connect to the host '
        'via ssh.", "unreachable": true}',
    ),
    sig(
        "sshd-no-more-sessions",
        "transport",
        70,
        # sshd refuses a channel past MaxSessions on one multiplexed connection
        r"sshd\[\d+\]: error: no more sessions|open failed: \w+ failed: no more sessions",
        "The worker's sshd refused another session on the shared connection (MaxSessions/MaxStartups): "
        "lower the fan-out per worker or raise those limits in sshd_config.",
        "https://github.com/ansible/ansible/issues/24594",
        "May 16 01:19:59 zabbix sshd[5202]: error: no more sessions",
    ),
    sig(
        "sshd-privsep-failed",
        "transport",
        75,
        # the worker's sshd cannot set up its privilege separation, so no login gets past the key exchange:
        # its chroot refused in a container without CAP_SYS_CHROOT (kubeflow/mpi-operator#642), or the
        # directory missing
        r"chroot\(\"/[^\"]*\"\): Operation not permitted|Missing privilege separation directory: /\S+",
        "The worker's sshd cannot chroot into its privilege-separation directory, so every login fails: "
        "in a container, grant CAP_SYS_CHROOT (or run sshd without privilege separation's chroot) and make "
        "sure /run/sshd exists.",
        "https://github.com/kubeflow/mpi-operator/issues/642",
        'chroot("/run/sshd"): Operation not permitted [preauth]',
    ),
    sig(
        "ssh-launcher-exit-255",
        "transport",
        60,
        # ssh exits 255 for its own errors (refused, unreachable, auth), so a launcher's ssh probe or
        # command failing with 255 never reached the worker: Python's CalledProcessError for an ssh
        # command, DeepSpeed's hostfile check, pdsh's rcmd
        r"Command '(\S*/)?ssh\b[^']*' returned non-zero exit status 255\b"
        r"|\bwas not reachable via ssh\b|\bssh exited with exit code 255\b",
        "The launcher's ssh to a worker failed before any command ran (ssh's exit code 255): run the same "
        "ssh by hand from the launching host (`ssh -o BatchMode=yes HOST true`) and fix the key, user or "
        "address it reports.",
        "https://github.com/deepspeedai/DeepSpeed/issues/4907",
        "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' "
        "returned non-zero exit status 255.",
    ),
    sig(
        "tf-tpu-master-unreachable",
        "transport",
        # a symptom: TensorFlow retries while a TPU node is still being scheduled too
        45,
        r"Failed to connect to the Tensorflow master\. The TPU worker may not be ready",
        "The client could not reach the TPU worker's gRPC endpoint (grpc://IP:8470): run from a VM in the "
        "TPU's network and check the TPU name/address and that the TPU is READY.",
        "https://github.com/google-research/bert/issues/325",
        "WARNING:tensorflow:Failed to connect to the Tensorflow master. The TPU worker may not be ready "
        "(still scheduling) or the Tensorflow master address is incorrect:",
    ),
)
