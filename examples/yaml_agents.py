"""Per-agent memory from a DeerFlow-style config.yaml: on for "researcher", off for "reviewer".

python examples/yaml_agents.py
"""

from __future__ import annotations

from pathlib import Path

from deermem_middleware import MemoryMiddleware

CONFIG = Path(__file__).with_name("config.yaml")

for name in ("researcher", "reviewer"):
    memory = MemoryMiddleware.from_config(CONFIG, agent_name=name)
    state = "on" if memory.active else "off"
    print(f"{name}: memory {state}, top_k={memory.config.top_k}")
    print(f"  storage: {memory.config.storage_path}")
