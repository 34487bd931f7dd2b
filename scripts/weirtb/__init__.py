"""weir's virtual testbed: network namespaces around the weir gateway and the
WAN emulator, plus traffic helpers. See docs/testbed.md."""

from .topology import (Testbed, TestbedError, PathSpec, paper_paths, down, status, read_state,
                       build_dir, weir_binary, wanemu_binary, weir_config, STATE_DIR)
from .config import weir_config_text, testbed_config_text, conf_body
from .traffic import (ping, iperf_flows, bulk_transfer, format_flows, FlowResult, BulkResult,
                      PingResult)

__all__ = ["Testbed", "TestbedError", "PathSpec", "paper_paths", "down", "status", "read_state",
           "build_dir", "weir_binary", "wanemu_binary", "weir_config", "weir_config_text",
           "testbed_config_text", "conf_body", "STATE_DIR", "ping", "iperf_flows", "bulk_transfer", "format_flows", "FlowResult", "BulkResult", "PingResult"]
