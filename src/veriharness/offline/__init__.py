"""The embedded offline model: a local stand-in for the agent's model and for CallMLLM.

It serves the Anthropic Messages API (streaming SSE, what `claude -p` speaks) with a scripted
agent policy, and an OpenAI-compatible chat API whose vision side answers from the pixels it
receives. Everything it produces is labelled offline; it is never a real model's result. The
model names it serves are in `experiment.offline_model`.
"""
