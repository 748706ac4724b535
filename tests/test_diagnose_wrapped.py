"""A log line a console wrapped (orchestrator.diagnose.classify): two neighbouring lines read as one."""

from __future__ import annotations

from orchestrator import diagnose as diag
from orchestrator.diagnose_wrapped import MIN_WRAPPED_LINE

# a fixed-width paste cut in the middle of a word (pytorch/xla#662's console cut every line at 92 columns)
CUT = (
    "RuntimeError: tensorflow/compiler/xla/xla_client/xrt_computation_client.cc:100 : Check faile\n"
    "d: session_work.first->session()->Run(...) == ::tensorflow::Status::OK() (Not found: Op type not regis\n"
    "tered 'XRTAllocateFromTensor' in binary running on n-897fcadd-w-0. Make sure the Op and Kernel are\n"
)
# a rich console's panel wrapping at a word, the rest indented under the message
INDENTED = (
    "[11:56:21] WARNING  worker.py:281 Provisioning could not be completed because of the error: No space left\n"
    "                    on device while writing /var/lib/runner/checkpoints/step_100\n"
)


def test_a_line_cut_in_the_middle_of_a_word_is_read_whole():
    v = diag.verdict(CUT)
    assert (v.layer, v.finding.signature_id, v.finding.line_number) == ("bundle-skew", "xrt-op-not-registered", 2)
    assert "Op type not registered 'XRTAllocateFromTensor'" in v.finding.line


def test_a_line_wrapped_at_a_word_is_read_whole():
    finding = diag.diagnose(INDENTED)
    assert finding is not None and (finding.signature_id, finding.line_number) == ("disk-full", 1)
    assert "No space left on device while writing" in finding.line


# a log quoted in a reply and re-wrapped at words (AI-Hypercomputer/xpk#492), each line behind "> "
QUOTED = (
    "> failed: INTERNAL: NCCL operation ncclGroupEnd() failed: unhandled system error (run with \n"
    "> NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated)  'Error \n"
    "> while creating shared memory segment /dev/shm/nccl-TfciGV (size 31850880), error: No space\n"
    "> left on device (28)'.\n"
)


def test_a_quoted_line_wrapped_at_a_word_is_read_whole():
    finding = diag.diagnose(QUOTED)
    assert finding is not None and (finding.signature_id, finding.line_number) == ("disk-full", 3)
    assert finding.line.endswith("error: No space left on device (28)'.")


def test_a_quoted_line_is_not_joined_with_an_unquoted_one():
    text = "> " + "x" * 60 + " No space\nleft on device\n"
    assert diag.diagnose(text) is None


def test_short_lines_are_never_joined():
    assert len("ERROR: No space left") < MIN_WRAPPED_LINE
    assert diag.diagnose("ERROR: No space left\non device") is None


def test_a_line_that_matches_alone_is_not_joined_with_the_next():
    text = "OSError: [Errno 28] No space left on device: '/data/ckpt'" + " " * 10 + "\nOOM killed\n"
    findings = diag.classify(text)
    assert [(f.signature_id, f.line_number) for f in findings] == [("disk-full", 1)]
    assert findings[0].line == text.splitlines()[0]


def test_neighbouring_lines_of_a_healthy_log_name_nothing():
    text = "\n".join(f"step {n:5d} loss {1 / (n + 1):.6f} tokens/s 123456.7 mfu 0.51 grad_norm 0.2" for n in range(50))
    assert diag.classify(text) == []


def test_only_the_last_pairs_of_a_huge_log_are_read_again(monkeypatch):
    monkeypatch.setattr(diag, "MAX_UNWRAPPED", 3)
    healthy = "".join(f"{f'step {n} of a long and healthy run, the loss still falling':<70}\n  ok\n" for n in range(5))
    assert diag.diagnose(INDENTED + healthy) is None  # the wrapped failure is not among the last 3 pairs
    finding = diag.diagnose(healthy + INDENTED)
    assert finding is not None and finding.signature_id == "disk-full"
