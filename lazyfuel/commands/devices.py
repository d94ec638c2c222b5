"""`lazyfuel devices`, and the `--device` / `--backend` choice of the commands that run kernels."""

from __future__ import annotations

import argparse
import os

from lazyfuel.commands.errors import UsageError
from lazyfuel.providers import available_backends
from lazyfuel.settings import config


def _devices(args: argparse.Namespace) -> int:
    """`lazyfuel devices`: every Vulkan device and the one the pool picks."""
    from lazyfuel.backends.catalog import describe_devices

    print(describe_devices())
    return 0


def use_device(args: argparse.Namespace) -> None:
    """--device and --backend reach every layer (and worker processes) through the environment,
    which `lazyfuel.config` then reads again. A --device that names no Vulkan device here is a
    UsageError listing the devices there are."""
    if getattr(args, "device", None):
        check_device(args.device)
        os.environ["LAZYFUEL_DEVICE"] = args.device
    if getattr(args, "backend_choice", None):
        os.environ["LAZYFUEL_BACKEND"] = args.backend_choice
    config.reload()


def check_device(wanted: str) -> None:
    """UsageError unless `wanted` (--device) names a Vulkan device here; its text lists them."""
    from lazyfuel.backends.catalog import choose_device

    try:
        choose_device(wanted.strip(), "--device")
    except Exception as err:  # no device matches, or no device backend at all: say which there are
        raise UsageError(str(err) if str(err).startswith("--device") else
                         f"--device={wanted!r}: no Vulkan device can be listed here: {err}") from err


def device_name() -> str:
    """Where kernels may run (for bench's title): the device the best device backend picks and
    the numpy reference, or numpy alone."""
    from lazyfuel.backends import catalog

    usable = available_backends()
    for found in catalog.registered():
        if found.choose_device is not None and found.backend in usable:
            info = found.choose_device(None, "LAZYFUEL_DEVICE")
            return f"{info.name} [{info.index}, {info.kind}] ({found.backend.name}) and the CPU (numpy)"
    return "the CPU via numpy (cpu backend)"


def add_devices_command(sub: argparse._SubParsersAction) -> None:
    """`devices`."""
    sub.add_parser("devices", help="list the Vulkan devices and the one the pool picks"
                   ).set_defaults(func=_devices)
