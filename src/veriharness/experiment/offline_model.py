"""The embedded offline model's names, as the experiment definition knows them.

A run is offline when its agent or its catalog profiles use these names (served by
`veriharness.offline`); the start check refuses any other name for the offline endpoint. They sit
here, below every stage, because they decide what "offline" means for a definition, its records
and the config's default agent model.
"""

OFFLINE_AGENT_MODEL = "veriharness-offline-agent-1"
OFFLINE_VISION_MODEL = "veriharness-offline-vision-1"

__all__ = ["OFFLINE_AGENT_MODEL", "OFFLINE_VISION_MODEL"]
