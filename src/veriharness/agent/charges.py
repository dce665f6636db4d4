"""What a session spends: its ledger settings, the proxy's admission check against the spending
caps, the price of each agent request charged to the ledger, and the run's spend at the end
(the agent's part from the proxy's records, the CallMLLM part from the trace).

Knows nothing of the session plan: a charger is given the prices and the model it charges.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from veriharness.agent.proxy import Admit
from veriharness.agent.request_record import (
    AgentRequest,
    Refusal,
    RequestFacts,
    is_model_request,
)
from veriharness.experiment.prices import TokenPrice
from veriharness.runfolder.mllm_trace import CallCompleted, read_trace
from veriharness.runfolder.outcome import Spend
from veriharness.runfolder.spend import TokenCounts
from veriharness.spend.ledger import BudgetExhausted, SpendGate, SpendSettings
from veriharness.spend.prices import cost_usd, estimate_tokens

__all__ = ["AgentCharges", "budget_admit", "each_record", "spend_settings", "trace_cost"]


def spend_settings(
    run_dir: Path, max_usd: float | None = None, max_usd_per_run: float | None = None
) -> SpendSettings:
    """The ledger settings of a run folder ``<experiment>/<condition>/<task>/r<k>``."""
    condition, task, replicate = run_dir.parts[-3:]
    return SpendSettings(
        experiment_dir=run_dir.parents[2],
        run_dir=run_dir,
        condition=condition,
        task=task,
        replicate=int(replicate.removeprefix("r")),
        max_usd=max_usd,
        max_usd_per_run=max_usd_per_run,
    )


def trace_cost(run_dir: Path) -> tuple[float | None, float]:
    """The sum of the run's CallMLLM call costs, and the part of it that is the caps' estimate
    for calls whose reply reported no usage (P-36); None when a completed call has neither a
    cost nor an estimate (its profile has no price)."""
    total = estimated = 0.0
    for event in read_trace(run_dir, []) or []:
        if isinstance(event, CallCompleted):
            if event.cost_usd is not None:
                total += event.cost_usd
            elif event.estimated_usd is not None:
                total += event.estimated_usd
                estimated += event.estimated_usd
            else:
                return None, estimated
    return total, estimated


def each_record(
    first: Callable[[AgentRequest], None], then: Callable[[AgentRequest], None] | None
) -> Callable[[AgentRequest], None]:
    """One record callback for the proxy: `first`, then `then` if given."""

    def each(request: AgentRequest) -> None:
        first(request)
        if then is not None:
            then(request)

    return each


def budget_admit(gate: SpendGate, also: Admit | None) -> Admit:
    """The proxy's admission check: refuse a request once a spending cap is reached (the gate
    leaves the stop file that ends the session), then ask `also`, if given. Every request is
    refused then, count_tokens too (which is never charged): none reaches the provider after the
    cap."""

    def admit(facts: RequestFacts) -> Refusal | None:
        try:
            gate.admit()
        except BudgetExhausted as refused:
            return Refusal(status=400, error_type="invalid_request_error", message=str(refused))
        return also(facts) if also is not None else None

    return admit


class AgentCharges:
    """Prices each agent request the proxy recorded and charges it to the ledger: at the price
    of the model the request names when `model_prices` lists it, else at `agent_price`."""

    def __init__(
        self,
        gate: SpendGate,
        model: str,
        agent_price: TokenPrice | None,
        model_prices: dict[str, TokenPrice],
    ) -> None:
        self.gate = gate
        self.model = model
        self.agent_price = agent_price
        self.model_prices = model_prices
        self.total = 0.0
        self.estimated = 0.0  # the part of `total` that estimates unpriced requests (P-36)
        self._lock = threading.Lock()

    def charge(self, request: AgentRequest) -> None:
        if not is_model_request(request.method, request.path):
            return  # count_tokens and Claude Code's other calls are not billed as messages
        tokens = TokenCounts.of(
            request.input_tokens,
            request.output_tokens,
            request.cache_read_input_tokens,
            request.cache_creation_input_tokens,
        )
        # A request names its model; Claude Code may use another than the agent's for a side
        # task. Priced by that name when listed, else at the agent model's price.
        price = self.model_prices.get(request.model or "") or self.agent_price
        if price is None:
            return  # no price for the model
        request_id = f"{request.time} {request.method} {request.path}"
        model = request.model or self.model
        reason = request.cost_unpriced_reason
        if reason is not None:
            # Answered without usage: charged at the estimate, never at $0 (P-36).
            tokens = estimate_tokens(request.request_bytes, request.max_tokens)
            estimate = cost_usd(price, tokens)
            self.gate.charge("agent", model, request_id, tokens, estimate, reason)
            with self._lock:
                self.total += estimate
                self.estimated += estimate
            return
        if tokens == TokenCounts():
            return  # nothing was used (refused, failed before an answer)
        cost = cost_usd(price, tokens)
        self.gate.charge("agent", model, request_id, tokens, cost)
        with self._lock:
            self.total += cost

    def spend(self, run_dir: Path) -> Spend:
        agent = self.total if self.agent_price is not None else None
        mllm, mllm_estimated = trace_cost(run_dir)
        total = None if agent is None or mllm is None else agent + mllm
        estimated = mllm_estimated + (self.estimated if agent is not None else 0.0)
        return Spend(
            agent_usd=agent,
            mllm_usd=mllm,
            total_usd=total,
            agent_source="proxy",
            cost_estimated=estimated > 0,
            estimated_usd=estimated if estimated > 0 else None,
        )
