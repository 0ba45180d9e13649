"""What the client knows about the host that crashed, sent next to the log.

A crash log often lacks the GPU model or the engine version; the machine that ran the
command knows them. Everything here is best effort: a missing `nvidia-smi` or package is
simply left out, never an error.
"""

from __future__ import annotations

import getpass
import os
import shlex
import socket
import subprocess
from collections import Counter
from dataclasses import asdict, dataclass, field
from importlib import metadata

from kb.client.settings import ENV_REPORTER

ENGINE_PACKAGES = ("vllm", "sglang")
# Launchers that run the engine from an image, not from this environment: the version
# installed here says nothing about the one that crashed.
CONTAINER_LAUNCHERS = {"docker", "podman", "nerdctl", "apptainer", "singularity", "enroot", "kubectl"}
PACKAGES = (*ENGINE_PACKAGES, "torch")
NVIDIA_SMI_TIMEOUT = 10.0


@dataclass(slots=True)
class HostInfo:
    command: str | None = None
    exit_code: int | None = None
    host: str | None = None
    reporter: str | None = None
    gpu_names: list[str] = field(default_factory=list)
    cuda_visible_devices: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    engine: str | None = None
    failure: str | None = None  # exit | hang | not_ready: why the log was uploaded

    @property
    def gpu(self) -> str | None:
        """The most common GPU model (hosts are nearly always homogeneous)."""
        if not self.gpu_names:
            return None
        return Counter(self.gpu_names).most_common(1)[0][0]

    def to_fields(self) -> dict[str, str]:
        """Form fields for `POST /incidents`: the override fields the service documents
        (docs/configuration.md, "Uploads"), including cuda_visible_devices, torch_version
        and failure, which it stores with the occurrence."""
        fields: dict[str, str] = {}
        if self.command:
            fields["command"] = self.command
        if self.exit_code is not None:
            fields["exit_code"] = str(self.exit_code)
        if self.host:
            fields["host"] = self.host
        if self.reporter:
            fields["reporter"] = self.reporter
        if self.gpu:
            fields["gpu"] = self.gpu
            fields["gpu_count"] = str(len(self.gpu_names))
        if self.engine and self.engine in self.versions:
            fields["engine"] = self.engine
            fields["engine_version"] = self.versions[self.engine]
        if self.cuda_visible_devices is not None:
            fields["cuda_visible_devices"] = self.cuda_visible_devices
        if "torch" in self.versions:
            fields["torch_version"] = self.versions["torch"]
        if self.failure:
            fields["failure"] = self.failure
        return fields

    def to_dict(self) -> dict:
        data = asdict(self)
        data["gpu"] = self.gpu
        data["gpu_count"] = len(self.gpu_names) or None
        return data


def gpu_names(timeout: float = NVIDIA_SMI_TIMEOUT) -> list[str]:
    """One name per GPU from `nvidia-smi`, or [] when it is absent, fails or hangs."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed versions in this interpreter's environment (the one `kb` runs in)."""
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def guess_engine(command: list[str], versions: dict[str, str]) -> str | None:
    """The engine the command launches, when this environment's version applies to it:
    named on the command line, else the only one installed; never for a container launch."""
    if command and os.path.basename(command[0]) in CONTAINER_LAUNCHERS:
        return None
    words = " ".join(command).lower()
    named = [engine for engine in ENGINE_PACKAGES if engine in words]
    if len(named) == 1:
        return named[0]
    installed = [engine for engine in ENGINE_PACKAGES if engine in versions]
    if not named and len(installed) == 1:
        return installed[0]
    return None


def reporter() -> str | None:
    value = os.environ.get(ENV_REPORTER)
    if value:
        return value
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers: not worth failing for
        return None


def collect(command: list[str] | None, exit_code: int | None, failure: str | None = None) -> HostInfo:
    versions = package_versions()
    return HostInfo(
        command=shlex.join(command) if command else None,
        exit_code=exit_code,
        host=socket.gethostname(),
        reporter=reporter(),
        gpu_names=gpu_names(),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        versions=versions,
        engine=guess_engine(command or [], versions),
        failure=failure,
    )
