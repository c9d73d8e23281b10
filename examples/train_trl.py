"""GRPO on statekit's claims desk with TRL's own trainer (``trl.GRPOTrainer``).

    python examples/train_trl.py --model Qwen/Qwen3-0.6B            # a real model (from the model hub)
    python examples/train_trl.py --model tiny --steps 2             # a tiny model built here, CPU only
    python examples/train_trl.py --url http://127.0.0.1:8000 ...    # worlds of a `statekit serve claims_app`

Each dataset row is one seed; TRL plays ``--generations`` rollouts of it (a GRPO group), each from
the seed's world (statekit checks they share one initial digest), lets the model call the claims
tools, and scores each rollout with ``get_reward()``: the task's verifier, collateral rule included.

``--model tiny`` needs no download: a byte-level BPE tokenizer trained here on the tools' own text,
TRL's Qwen 2.5 chat template (tool calls as ``<tool_call>{json}</tool_call>``) and a two-layer Qwen2
model from a config, taught in 100 supervised steps to call a tool, so the trainer's real loop (tool
calls, resets, rewards, the optimiser) runs in CI in about half a minute. It does not learn the task.
``--report PATH`` writes every rollout (seed, initial digest, actions, reward) as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen2_5_chat_template

from statekit.integrations.trl import StatekitToolEnv, environment_factory

# statekit's egress guard refuses every outbound connection made in this process during an episode,
# the trainer's own included: the model hub's telemetry thread would end the run.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

SYSTEM = "You are an insurance claims adjuster. Act only through the tools; call submit when done."
TINY_TOOLS = ["list_claims", "get_claim", "submit"]
"""What the tiny model is offered unless --tools says otherwise: a prompt short enough for the CPU."""
log = logging.getLogger("train_trl")


def tools_of(env: StatekitToolEnv) -> list[dict[Any, Any] | Callable[..., Any]]:
    """The bound tool methods TRL offers the model (its own rule: public, not reset/get_reward)."""
    return [
        getattr(env, name)
        for name in sorted(vars(type(env)))
        if not name.startswith("_") and callable(getattr(env, name)) and name not in ("reset", "get_reward")
    ]


def call_text(tool: str, arguments: dict[str, Any]) -> str:
    """An assistant turn that calls ``tool`` in the Qwen 2.5 format TRL parses."""
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call><|im_end|>"


def tiny_model(corpus: list[str], seed: int = 0) -> tuple[Any, PreTrainedTokenizerFast]:
    """A tokenizer trained on ``corpus`` and a two-layer Qwen2 built from a config: no download."""
    torch.manual_seed(seed)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=3000, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    bpe.add_tokens([AddedToken("<tool_call>", special=False), AddedToken("</tool_call>", special=False)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
        chat_template=qwen2_5_chat_template,
    )
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16384,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    return AutoModelForCausalLM.from_config(config), tokenizer


def warm_up(
    model: Any, tokenizer: PreTrainedTokenizerFast, examples: list[tuple[str, str]], steps: int
) -> None:
    """Teach the model the tool-call format: supervised steps on whole (prompt, completion) pairs in one
    batch, the loss on the completion only."""
    rows = []
    for prompt, completion in examples:
        head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        tail = tokenizer(completion, add_special_tokens=False)["input_ids"]
        rows.append((head + tail, [-100] * len(head) + tail))
    width = max(len(ids) for ids, _ in rows)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(i)) + i for i, _ in rows])
    labels = torch.tensor([[-100] * (width - len(lab)) + lab for _, lab in rows])
    mask = (torch.arange(width)[None, :] >= torch.tensor([[width - len(i)] for i, _ in rows])).long()
    keep = 1 + max(len(lab) - lab.count(-100) for _, lab in rows)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels[:, -keep:], logits_to_keep=keep).loss
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    log.info("warm-up: %d steps, last loss %.3f", steps, loss.item())


def user_prompt() -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Your task:\n"}]


def tiny_setup(factory: Any, seeds: list[int], warm_steps: int) -> tuple[Any, PreTrainedTokenizerFast]:
    """The tiny model, its tokenizer trained on these worlds' prompts, warmed up to call tools."""
    env = factory()
    tools = tools_of(env)
    rows = []
    for seed in seeds:
        messages = user_prompt()
        messages[-1] = {"role": "user", "content": messages[-1]["content"] + env.reset(seed=seed)}
        rows.append(messages)
    env._close()
    calls = [call_text("list_claims", {"assigned_to_me": True}), call_text("submit", {"summary": "done"})]
    ref = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE()), chat_template=qwen2_5_chat_template
    )
    prompts = [
        str(ref.apply_chat_template(m, tools=tools, tokenize=False, add_generation_prompt=True)) for m in rows
    ]
    model, tokenizer = tiny_model(prompts + calls * 20)
    random.seed(0)
    warm_up(model, tokenizer, [(random.choice(prompts), random.choice(calls)) for _ in range(4)], warm_steps)
    return model, tokenizer


def train(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="tiny", help="a model id or path, or 'tiny' (built here)")
    parser.add_argument("--url", help="a statekit serve of claims_app (default: worlds made in this process)")
    parser.add_argument("--token", help="the serve's STATEKIT_TOKEN")
    parser.add_argument("--seeds", default="1,2", help="comma-separated seeds: one dataset row (group) each")
    parser.add_argument("--tools", help="comma-separated tools to offer (default: all of them)")
    parser.add_argument("--generations", type=int, default=4, help="rollouts per group")
    parser.add_argument("--steps", type=int, default=2, help="optimiser steps")
    parser.add_argument("--max-completion-length", type=int, default=96)
    parser.add_argument("--warm-up-steps", type=int, default=100, help="tiny model only")
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--report", type=Path, help="write every rollout as JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stdout)

    if args.model == "tiny":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing to download
    seeds = [int(s) for s in args.seeds.split(",")]
    tools = args.tools.split(",") if args.tools else (TINY_TOOLS if args.model == "tiny" else None)
    if args.url:
        factory = environment_factory(url=args.url, token=args.token, tools=tools)
    else:
        factory = environment_factory("claims_app", tools=tools)
    tokenizer: Any
    if args.model == "tiny":
        model, tokenizer = tiny_setup(factory, seeds, args.warm_up_steps)
    else:
        model, tokenizer = args.model, AutoTokenizer.from_pretrained(args.model, padding_side="left")
    dataset = Dataset.from_list([{"prompt": user_prompt(), "seed": seed} for seed in seeds])
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="statekit-grpo-")
    config = GRPOConfig(
        output_dir=output_dir,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=3,
        max_steps=args.steps,
        learning_rate=1e-4,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        shuffle_dataset=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=factory,
    )
    result = trainer.train()
    for rollout in factory.rollouts:
        log.info(
            "group seed=%s initial_digest=%s reward=%s actions=%s",
            rollout["seed"],
            rollout["initial_digest"][:16],
            rollout["reward"],
            [step["action"]["tool"] for step in rollout["steps"]],
        )
    report = {
        "global_step": result.global_step,
        "rollouts": factory.rollouts,
        "log_history": trainer.state.log_history,
    }
    if args.report:
        args.report.write_text(json.dumps(report, default=str, indent=1))
    return report


if __name__ == "__main__":
    train()
