"""Spend: prices, the spending ledger and caps, and the live status of an experiment.

Reads the price table of the config, writes ``results/<experiment>/spend/ledger.jsonl`` (every
priced request, with running totals) and each run's ``spend.jsonl``; `status` reads the run
folders and the ledger only. Used by the agent session, the agent proxy and the ``mllm`` server,
which check the caps before each request.
"""
