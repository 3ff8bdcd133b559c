"""The playbook format (seeds 000, 002; DESIGN.md section 8): JSON validated by models that refuse
unknown fields, so a typo (`args_input`, `available_tools`) is an error, never a silently dropped value."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Profile = Literal["conversation", "router", "worker", "worker_light"]
Operator = Literal["eq", "ne", "in", "contains", "truthy", "gt", "lt"]
NAME = r"^[a-z][a-z0-9_]{0,63}$"
VARIABLE = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*(?:\.[a-zA-Z0-9_]+)*)\}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConditionalNext(Strict):
    """Where to go by a state value: the first case that matches, else `default`."""

    field: str = Field(min_length=1)
    operator: Operator = "eq"
    cases: dict[str, str] = Field(default_factory=dict)  # value (as text) -> node id
    default: str | None = None


class NodeBase(Strict):
    id: str = Field(pattern=NAME)
    next: str | None = None  # None with no conditional_next: the playbook ends here
    conditional_next: ConditionalNext | None = None

    @model_validator(mode="after")
    def _one_way_on(self) -> NodeBase:
        if self.next is not None and self.conditional_next is not None:
            raise ValueError("a node has `next` or `conditional_next`, not both")
        return self

    def successors(self) -> list[str]:
        if self.conditional_next is not None:
            c = self.conditional_next
            return [*c.cases.values(), *([c.default] if c.default else [])]
        return [self.next] if self.next else []


class LLMNode(NodeBase):
    type: Literal["llm"]
    context_profile: Profile
    # The instruction, a template over the state. Empty only for the conversation profile: the request is
    # then the normal reply's, byte for byte (the `meta_user` playbook).
    action: str
    response_schema: dict[str, Any] | None = None  # structured output: the answer is this JSON object
    output_key: str | None = None
    tools: list[str] = Field(default_factory=list)
    max_tool_rounds: int = Field(3, ge=0, le=20)
    speak: bool = False  # the answer is said in the conversation (stored as the persona's message)
    memorize: bool = False  # the answer is kept in the current thread's history


    @model_validator(mode="after")
    def _instruction(self) -> LLMNode:
        if not self.action.strip() and self.context_profile != "conversation":
            raise ValueError("action: only a conversation-profile node may leave its instruction empty")
        return self


class ToolNode(NodeBase):
    type: Literal["tool"]
    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    output_key: str | None = None


class SetNode(NodeBase):
    type: Literal["set"]
    values: dict[str, Any] = Field(min_length=1)


class RouteNode(NodeBase):
    type: Literal["route"]

    @model_validator(mode="after")
    def _conditional(self) -> RouteNode:
        if self.conditional_next is None:
            raise ValueError("a route node needs `conditional_next`")
        return self


class SubplayNode(NodeBase):
    type: Literal["subplay"]
    playbook: str = Field(pattern=NAME)
    args: dict[str, Any] = Field(default_factory=dict)
    execution: Literal["inline", "subagent"] = "inline"
    output_key: str | None = None


class StelisConfig(Strict):
    window_ratio: float | None = Field(None, gt=0.0, lt=1.0)
    max_depth: int | None = Field(None, ge=0, le=10)  # how deep this playbook may go below where it starts
    chronicle_prompt: str | None = None


class StelisStartNode(NodeBase):
    type: Literal["stelis_start"]
    label: str = Field(min_length=1)
    stelis_config: StelisConfig = StelisConfig()


class StelisEndNode(NodeBase):
    type: Literal["stelis_end"]
    generate_chronicle: bool = True


Node = Annotated[LLMNode | ToolNode | SetNode | RouteNode | SubplayNode | StelisStartNode | StelisEndNode,
                 Field(discriminator="type")]


class Playbook(Strict):
    name: str = Field(pattern=NAME)
    description: str = Field(min_length=1)
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    start_node: str
    nodes: list[Node] = Field(min_length=1)

    @property
    def inputs(self) -> set[str]:
        return set((self.input_schema.get("properties") or {}).keys())

    @property
    def outputs(self) -> set[str]:
        """The only keys a caller gets back (with `last`, the final answer)."""
        return set((self.output_schema.get("properties") or {}).keys())

    def node(self, node_id: str) -> NodeBase:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

