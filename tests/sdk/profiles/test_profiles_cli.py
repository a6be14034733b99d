"""Profiles (issue 28 item 4): ``ma-submit configure`` once, then every backend with no flags.

Every test runs the real ``ma-submit`` with its own config folder (``XDG_CONFIG_HOME`` in the test's temporary
folder; the root conftest already points it away from the user's real ``~/.config``). The ModelArts and Volcano
jobs are dry runs (the endpoints are addresses nobody listens on, the kubeconfig is the loopback fake's); the
local job really runs.
"""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from fake_modelarts import FakeModelArts
from kubefake import FakeKube
from modelarts_env import AK, BUCKET, PROJECT, SK
from sdkutil import CLI_TIMEOUT, VENV_BIN, ma_submit

pytestmark = pytest.mark.process

JOB = "name: demo\ncode_dir: .\nboot_file: boot.py\n"
IMAGE = "swr.cn-north-4.example.com/team/train:1"
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture
def env(cli_env: Dict[str, str], tmp_path: Path) -> Dict[str, str]:
    """``ma-submit``'s environment with a config folder of its own and no kubeconfig or profile variable."""
    out = {k: v for k, v in cli_env.items() if k != "KUBECONFIG"}
    out["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return out


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder with a job file that names no backend, image, bucket or namespace."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "boot.py").write_text("print('hello from the profile job')\n")
    (folder / "job.yaml").write_text(JOB)
    return folder


def configure(env: Dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``ma-submit configure ARGS`` with ``stdin`` on its standard input."""
    return subprocess.run(
        [os.path.join(VENV_BIN, "ma-submit"), "configure", *args],
        env=env, input=stdin, capture_output=True, text=True, timeout=CLI_TIMEOUT,
    )  # fmt: skip


def profiles_file(env: Dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "malaunch" / "profiles.ini"


def two_context_kubeconfig(kube: FakeKube, path: Path) -> Path:
    """The fake cluster's kubeconfig with a second context, ``team`` (namespace ``team-ns``), not the current one."""
    config = yaml.safe_load(kube.kubeconfig(path).read_text())
    team = {"cluster": "fake", "user": "tester", "namespace": "team-ns"}
    config["contexts"].append({"name": "team", "context": team})
    path.write_text(yaml.safe_dump(config))
    return path


def configure_modelarts(env: Dict[str, str], name: str = "ma") -> None:
    done = configure(
        env, "--profile", name, "--backend", "modelarts", "--region", "cn-north-4", "--project-id", PROJECT,
        "--ak", AK, "--sk-stdin", "--obs-dir", "obs://team-bucket/jobs", "--image", IMAGE,
        "--flavor", "modelarts.vm.cpu.8u", "--endpoint", NOWHERE, "--obs-endpoint", NOWHERE, stdin=SK + "\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"profile {name} written to {profiles_file(env)}" in done.stderr


def origins(stderr: str) -> Dict[str, List[str]]:
    """The ``--dry-run`` block (on stderr) of where the values came from: key -> the words after it."""
    block = stderr[stderr.index("values (profile ") :].splitlines()[1:]
    return {line.split()[0]: line.split()[1:] for line in block}


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single error line of a failed run (exit 2, nothing else on stderr, no traceback)."""
    lines = done.stderr.splitlines()
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("ma-submit: error: "), done.stderr
    return lines[0]


def test_a_new_user_configures_once_then_submits_to_each_backend_with_no_flags(
    env: Dict[str, str], work: Path, kube: FakeKube, tmp_path: Path, cleanup_jobs: None
) -> None:
    kubeconfig = two_context_kubeconfig(kube, tmp_path / "kubeconfig")
    configure_modelarts(env)
    done = configure(env, "--profile", "k8s", "--backend", "volcano", "--kubeconfig", str(kubeconfig),
                     "--context", "team", "--queue", "gpu-queue", "--image", "registry.example/train:2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert configure(env, "--backend", "local", "--keep-for", "7d").returncode == 0  # the profile "default"
    path = profiles_file(env)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

    ma = ma_submit(["--profile", "ma", "job.yaml", "--dry-run", "--output", "json"], env, cwd=str(work))
    assert ma.returncode == 0, ma.stderr
    plan = json.loads(ma.stdout)
    assert plan["backend"] == "modelarts"
    text = json.dumps(plan)
    assert IMAGE in text and "team-bucket" in text and "modelarts.vm.cpu.8u" in text and PROJECT in text
    assert "no credentials" not in text

    vc_env = {**env, "MALAUNCH_PROFILE": "k8s"}
    vc = ma_submit(["job.yaml", "--dry-run", "--output", "json"], vc_env, cwd=str(work))
    assert vc.returncode == 0, vc.stderr
    manifest = json.loads(vc.stdout)["request"]["manifest"]
    assert manifest["metadata"]["namespace"] == "team-ns"  # the profile's context, not the current one
    assert manifest["spec"]["queue"] == "gpu-queue"
    assert "registry.example/train:2" in json.dumps(manifest)

    local = ma_submit(["job.yaml"], env, cwd=str(work))
    assert local.returncode == 0, local.stderr
    assert "hello from the profile job" in local.stdout
    assert "(local:" in local.stderr


def test_a_job_file_value_beats_the_profile_and_the_dry_run_says_where_each_came_from(
    env: Dict[str, str], work: Path
) -> None:
    configure_modelarts(env)
    (work / "job.yaml").write_text(JOB + "image: mine:3\nresources:\n  flavor: modelarts.vm.gpu.1\n")
    done = ma_submit(["--profile", "ma", "job.yaml", "--dry-run"], env, cwd=str(work))
    assert done.returncode == 0, done.stderr
    rows = origins(done.stderr)
    assert rows["backend"] == ["modelarts", "profile", "ma"]
    assert rows["image"] == ["mine:3", "job", "file"]
    assert rows["modelarts.flavor"] == ["modelarts.vm.gpu.1", "job", "file"]
    assert rows["modelarts.obs_dir"] == ["obs://team-bucket/jobs", "profile", "ma"]
    assert rows["modelarts.pool"][:2] == ["-", "default"]
    assert rows["modelarts.sk"] == ["(set,", "hidden)", "profile", "ma"]
    assert "mine:3" in done.stdout and "values (profile" not in done.stdout  # stdout is the plan alone

    # a region in the environment without its access key is not the credentials' source: the profile is
    done = ma_submit(
        ["--profile", "ma", "job.yaml", "--dry-run"], {**env, "HUAWEICLOUD_SDK_REGION": "x"}, cwd=str(work)
    )
    assert done.returncode == 0, done.stderr
    assert origins(done.stderr)["modelarts.region"] == ["cn-north-4", "profile", "ma"]

    # the environment's credentials beat the profile's; the command line's backend beats both files
    env_creds = {**env, "HUAWEICLOUD_SDK_AK": "AKFROMENV", "HUAWEICLOUD_SDK_SK": SK + "env",
                 "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT, "HUAWEICLOUD_SDK_REGION": "cn-north-4"}  # fmt: skip
    done = ma_submit(["--profile", "ma", "job.yaml", "--dry-run"], env_creds, cwd=str(work))
    assert done.returncode == 0, done.stderr
    assert origins(done.stderr)["modelarts.ak"] == ["(set,", "hidden)", "environment", "(HUAWEICLOUD_SDK_AK)"]
    assert "AKFROMENV" not in done.stdout + done.stderr
    assert SK not in done.stdout + done.stderr
    done = ma_submit(["--profile", "ma", "job.yaml", "--dry-run", "--backend", "volcano"], env, cwd=str(work))
    assert done.returncode == 0, done.stderr
    rows = origins(done.stderr)
    assert rows["backend"] == ["volcano", "command", "line"]
    assert rows["volcano.queue"][:2] == ["-", "default"] and "modelarts.obs_dir" not in rows
    assert "team-bucket" not in done.stdout + done.stderr  # another backend's keys are not used


def test_no_secret_is_ever_printed(env: Dict[str, str], work: Path) -> None:
    configure_modelarts(env)
    outputs: List[str] = []
    for args in (["configure", "show", "--profile", "ma"], ["configure", "show", "--profile", "ma", "--output",
                 "json"], ["configure", "list"], ["--profile", "ma", "job.yaml", "--dry-run"],
                 ["--profile", "ma", "job.yaml", "--dry-run", "--output", "json"]):  # fmt: skip
        done = ma_submit(args, env, cwd=str(work))
        assert done.returncode == 0, (args, done.stderr)
        outputs.append(done.stdout + done.stderr)
    refused = configure(env, "--profile", "ma", "--set", f"modelarts.sk={SK}")
    assert "--sk-stdin" in one_error_line(refused)
    outputs.append(refused.stdout + refused.stderr)
    assert SK in profiles_file(env).read_text()
    for text in outputs:
        assert SK not in text and SK[:8] not in text
    assert ["modelarts.sk", "(set,", "hidden)"] in [line.split() for line in outputs[0].splitlines()]
    assert "* ma" not in outputs[2] and "  ma" in outputs[2]


def test_bad_name_missing_profile_damaged_or_readable_file_is_one_clear_line(env: Dict[str, str], work: Path) -> None:
    line = one_error_line(ma_submit(["--profile", "nosuch", "job.yaml", "--dry-run"], env, cwd=str(work)))
    assert "no profile 'nosuch' (--profile)" in line and "ma-submit configure --profile nosuch" in line
    configure_modelarts(env)
    line = one_error_line(ma_submit(["status", "abc", "--profile", "nosuch"], env))  # every verb reads it
    assert "no profile 'nosuch'" in line and "(profiles: ma)" in line
    line = one_error_line(ma_submit(["job.yaml", "--dry-run"], {**env, "MALAUNCH_PROFILE": "no such"}, cwd=str(work)))
    assert "a profile name must be" in line
    path = profiles_file(env)
    good = path.read_text()

    path.chmod(0o644)  # others may read it: a warning wherever it is read, a refusal only where a secret is read
    warning = (f"ma-submit: warning: the profile file {path} can be read by others (mode 644); its secrets are not "
               f"used until you run 'chmod 600 {path}'")  # fmt: skip
    for args in (["--profile", "ma", "job.yaml", "--dry-run"], ["list"], ["configure", "show", "--profile", "ma"],
                 ["configure", "list"]):  # fmt: skip
        done = ma_submit(args, env, cwd=str(work))
        assert done.returncode == 0, (args, done.stderr)
        assert done.stderr.splitlines().count(warning) == 1 and "error" not in done.stderr, (args, done.stderr)
    uuid = "7afee9aa-df1c-409f-ae62-9737dcb0f2e2"
    refused = ma_submit(["status", "--profile", "ma", "--backend", "modelarts", uuid], env)  # reads the keys
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.splitlines()[-1] == (f"ma-submit: error: the profile file {path} can be read by others "
                                               f"(mode 644); run 'chmod 600 {path}'"), refused.stderr  # fmt: skip
    assert SK not in refused.stderr and AK not in refused.stderr
    path.chmod(0o600)

    path.write_text("[ma\nbackend = modelarts\n")
    line = one_error_line(ma_submit(["--profile", "ma", "job.yaml", "--dry-run"], env, cwd=str(work)))
    assert f"the profile file {path} is damaged" in line
    path.write_text(good.replace("[ma]", "[ma]\nmodelarts.regoin = cn-north-4"))
    line = one_error_line(ma_submit(["--profile", "ma", "job.yaml", "--dry-run"], env, cwd=str(work)))
    assert "unknown key" in line and "'modelarts.regoin'" in line
    path.write_text(good.replace("[ma]", "[ma]\nmodelarts.pool = one\n  two"))
    line = one_error_line(ma_submit(["--profile", "ma", "job.yaml", "--dry-run"], env, cwd=str(work)))
    assert "spans several lines" in line
    path.write_text(good.replace("obs://team-bucket/jobs", "s3://team-bucket/jobs"))
    line = one_error_line(ma_submit(["--profile", "ma", "job.yaml", "--dry-run"], env, cwd=str(work)))
    assert line.startswith("ma-submit: error: profile ma: modelarts.obs_dir: must be an OBS folder"), line


def test_the_old_modelarts_ini_keeps_working_and_a_profile_with_keys_wins(
    env: Dict[str, str], work: Path, tmp_path: Path
) -> None:
    ini = Path(env["HOME"]) / ".config" / "malaunch" / "modelarts.ini"
    env = {**env, "MALAUNCH_MODELARTS_PROFILE": str(tmp_path / "modelarts.ini")}
    old_project = "f" * 32
    Path(env["MALAUNCH_MODELARTS_PROFILE"]).write_text(
        f"[default]\nak = AKOLDFILE\nsk = {SK}old\nproject_id = {old_project}\nregion = cn-north-4\n"
    )
    os.chmod(env["MALAUNCH_MODELARTS_PROFILE"], 0o600)
    job = (
        JOB + "backend: modelarts\nimage: img:1\nresources: {flavor: f1}\nmodelarts: {obs_dir: 'obs://old-bucket/x'}\n"
    )
    (work / "job.yaml").write_text(job)
    done = ma_submit(["job.yaml", "--dry-run", "--output", "json"], env, cwd=str(work))
    assert done.returncode == 0, done.stderr
    assert old_project in done.stdout and "no credentials" not in done.stdout
    assert configure(env, "--backend", "modelarts", "--endpoint", NOWHERE).returncode == 0  # a profile, no keys
    done = ma_submit(["job.yaml", "--dry-run", "--output", "json"], env, cwd=str(work))
    assert old_project in done.stdout and NOWHERE in done.stdout
    configure_modelarts(env, "default")  # now the profile has keys: they win over modelarts.ini
    done = ma_submit(["job.yaml", "--dry-run", "--output", "json"], env, cwd=str(work))
    assert done.returncode == 0, done.stderr
    assert PROJECT in done.stdout and old_project not in done.stdout
    assert not ini.exists()


def test_help_documents_profiles(env: Dict[str, str]) -> None:
    top = ma_submit(["--help"], env)
    assert "configure" in top.stdout
    for verb in ("submit", "status", "logs", "stop", "list", "prune", "events", "exec"):
        assert "--profile NAME" in ma_submit([verb, "--help"], env).stdout, verb
    done = ma_submit(["configure", "--help"], env)
    assert done.returncode == 0, done.stderr
    for word in ("profiles.ini", "--sk-stdin", "--obs-dir", "--context", "--keep-for", "--set KEY=VALUE", "0600",
                 "configure list | show"):  # fmt: skip
        assert word in done.stdout, word
    assert ma_submit(["configure", "show", "--help"], env).returncode == 0


def test_configure_refuses_bad_values_and_nothing_given_off_a_terminal(env: Dict[str, str]) -> None:
    assert "nothing to configure" in one_error_line(configure(env))
    assert "keep_for is not a duration" in one_error_line(configure(env, "--keep-for", "soon"))
    assert "--set takes KEY=VALUE" in one_error_line(configure(env, "--set", "colour=blue"))
    assert "no value for modelarts.sk" in one_error_line(configure(env, "--sk-stdin"))
    assert not profiles_file(env).exists()
    assert configure(env, "--profile", "a", "--image", "x:1").returncode == 0
    assert configure(env, "--profile", "a", "--unset", "image", "--queue", "q").returncode == 0
    shown = ma_submit(["configure", "show", "--profile", "a", "--output", "json"], env)
    assert json.loads(shown.stdout)["values"] == {"volcano.queue": "q"}


def _until(fd: int, text: str, seen: List[str], transcript: List[str], timeout: float = 60.0) -> None:
    """Read the terminal ``fd`` into ``seen`` (and ``transcript``) until ``text`` was shown."""
    deadline = time.monotonic() + timeout
    while text not in "".join(seen):
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} on the terminal; it showed: {''.join(seen)!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            assert chunk, f"the terminal closed before {text!r}; it showed: {''.join(seen)!r}"
            seen.append(chunk.decode(errors="replace"))
            transcript.append(seen[-1])


def test_on_a_terminal_configure_asks_for_each_value_and_hides_the_secret(env: Dict[str, str]) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: ma-submit on the terminal
        os.execve(os.path.join(VENV_BIN, "ma-submit"), ["ma-submit", "configure", "--profile", "tty"], env)
    seen: List[str] = []
    transcript: List[str] = []  # everything the terminal showed, the typed answers' echo included
    try:
        answers = [
            ("backend", "modelarts"),
            ("image (", "img:9"),
            ("keep_for (", ""),
            ("modelarts.region (", "cn-north-4"),
            ("modelarts.project_id (", PROJECT),
            ("modelarts.ak (", AK),
            ("modelarts.sk (", SK),
            *((f"modelarts.{key} (", "") for key in ("security_token", "endpoint", "obs_endpoint")),
            ("modelarts.obs_dir (", "obs://tty-bucket/x"),
            ("modelarts.flavor (", ""),
            ("modelarts.pool (", ""),
        ]
        for prompt, answer in answers:
            _until(fd, prompt, seen, transcript)
            seen.append("\n")  # later prompts are looked for after this point
            del seen[:-1]
            os.write(fd, answer.encode() + b"\r")
        _until(fd, "profile tty written to", seen, transcript)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert "cn-north-4" in "".join(transcript) and SK not in "".join(transcript)  # typed hidden, never shown
    values = json.loads(ma_submit(["configure", "show", "--profile", "tty", "--output", "json"], env).stdout)["values"]
    assert values == {"backend": "modelarts", "image": "img:9", "modelarts.region": "cn-north-4",
                      "modelarts.project_id": PROJECT, "modelarts.ak": "(set, hidden)", "modelarts.sk": "(set, hidden)",
                      "modelarts.obs_dir": "obs://tty-bucket/x"}  # fmt: skip
    assert f"modelarts.sk = {SK}" in profiles_file(env).read_text()


def test_real_submits_take_the_cluster_and_the_credentials_from_the_profile(
    env: Dict[str, str], work: Path, kube: FakeKube, fake_ma: FakeModelArts, s3: Any, moto_s3: str, tmp_path: Path
) -> None:
    env = {**env, "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    (work / "job.yaml").write_text(JOB + "run_method: torchrun\nenv: {MALAUNCH_TEST_SCENARIO: succeed}\n")
    kubeconfig = two_context_kubeconfig(kube, tmp_path / "kubeconfig")
    done = configure(env, "--profile", "k8s", "--backend", "volcano", "--kubeconfig", str(kubeconfig),
                     "--context", "team", "--image", "reg.example/malaunch:0.1.0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = configure(
        env, "--profile", "ma", "--backend", "modelarts", "--region", "cn-north-4", "--project-id", PROJECT,
        "--ak", AK, "--sk-stdin", "--obs-dir", f"obs://{BUCKET}/jobs/", "--image", IMAGE,
        "--flavor", "modelarts.vm.cpu.8u", "--endpoint", fake_ma.url, "--obs-endpoint", moto_s3, stdin=SK + "\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outputs: List[str] = []

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        result = ma_submit(list(args), env, cwd=str(work))
        outputs.extend([result.stdout, result.stderr])
        assert result.returncode == 0, (args, result.stderr)
        return result

    job_id = run("--profile", "k8s", "--detach", "job.yaml").stdout.strip()
    assert job_id.startswith("team-ns/demo-")  # the profile's context (and its namespace)
    run("wait", job_id, "--profile", "k8s")
    listed = json.loads(run("list", "--profile", "k8s", "--output", "json").stdout)  # the profile's backend
    assert job_id in {item["id"] for item in listed}
    name = job_id.split("/", 1)[1]
    assert f"id:        {job_id}" in run("status", "--backend", "volcano", name, "--profile", "k8s").stdout

    followed = run("--profile", "ma", "job.yaml")  # uploads, creates, follows: signed with the profile's keys
    assert "SUCCEEDED" in followed.stderr
    (platform_id,) = fake_ma.jobs
    body = fake_ma.jobs[platform_id].body
    assert body["spec"]["resource"]["flavor_id"] == "modelarts.vm.cpu.8u"
    assert fake_ma.signature_failures == [] and fake_ma.body_errors == []
    listed = json.loads(run("list", "--output", "json", "--profile", "ma").stdout)
    assert {item["id"] for item in listed} == {body["metadata"]["name"]}
    assert not any(SK in text for text in outputs)


def test_a_sweep_takes_its_trials_defaults_and_its_drivers_cluster_from_the_profile(
    env: Dict[str, str], work: Path, kube: FakeKube, tmp_path: Path
) -> None:
    (work / "job.yaml").write_text(
        JOB + "run_method: torchrun\nargs: ['--lr', '{lr}']\nenv: {MALAUNCH_TEST_SCENARIO: succeed}\n"
    )
    kubeconfig = two_context_kubeconfig(kube, tmp_path / "kubeconfig")
    done = configure(env, "--profile", "k8s", "--backend", "volcano", "--kubeconfig", str(kubeconfig),
                     "--context", "team", "--queue", "gpu-queue", "--image", "reg.example/malaunch:0.1.0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    args = ["sweep", "job.yaml", "--param", "lr=1,2", "--profile", "k8s"]
    dry = ma_submit([*args, "--dry-run", "--output", "json"], env, cwd=str(work))
    assert dry.returncode == 0, dry.stderr
    manifests = [trial["plan"]["request"]["manifest"] for trial in json.loads(dry.stdout)["trials"]]
    assert [m["metadata"]["namespace"] for m in manifests] == ["team-ns", "team-ns"]
    assert {m["spec"]["queue"] for m in manifests} == {"gpu-queue"}
    assert origins(dry.stderr)["volcano.queue"] == ["gpu-queue", "profile", "k8s"]

    submitted = ma_submit([*args, "--detach"], env, cwd=str(work))
    assert submitted.returncode == 0, submitted.stderr
    sweep_id = submitted.stdout.strip()
    waited = ma_submit(["sweep", "wait", sweep_id], env, cwd=str(work))  # the driver started the second trial
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    assert len(kube.cluster.created) == 2
    assert {m["metadata"]["namespace"] for m in kube.cluster.created} == {"team-ns"}


def test_configures_at_once_lose_nothing(env: Dict[str, str]) -> None:
    runs = [
        subprocess.Popen(
            [os.path.join(VENV_BIN, "ma-submit"), "configure", "--profile", f"p{index}", "--image", f"img:{index}"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(6)
    ]
    for run in runs:
        _, err = run.communicate(timeout=CLI_TIMEOUT)
        assert run.returncode == 0, err
    listed = json.loads(ma_submit(["configure", "list", "--output", "json"], env).stdout)
    assert [item["name"] for item in listed] == [f"p{index}" for index in range(6)]
    assert not [name for name in os.listdir(profiles_file(env).parent) if name.startswith(".tmp-")]
