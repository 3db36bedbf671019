#!/usr/bin/env python3
"""Writes a request trace for `kpipe serve`: JSON lines, one request each.

  make_trace.py --kind synthetic --vocab 63 --context 512 --requests 32 --out synthetic.jsonl
  make_trace.py --kind kjv --text examples/lm/kjv.txt --context 512 --requests 32 --out kjv.jsonl

Arrivals are a Poisson process of --rate requests per second. Prompt and
output lengths are drawn log-uniformly from 32-1,024 and 16-256 tokens (a few
long prefills among many short ones, as in served traffic), both scaled by
context / 1,280 so that every request fits the model's context: context 512
gives prompts of 13-409 and outputs of 6-102 tokens. synthetic prompts are
token ids below --vocab (prompt_tokens); kjv prompts are consecutive verses of
the King James Bible (examples/lm/prepare_kjv.sh writes the text) cut to the
drawn length, as text for the character model. The same seed gives the same
trace. Standard library only, so it runs wherever Python 3 does.
"""

import argparse
import json
import math
import random
import sys

PROMPT_TOKENS = (32, 1024)
OUTPUT_TOKENS = (16, 256)


def scaled_range(bounds, scale):
    return max(1, round(bounds[0] * scale)), max(1, round(bounds[1] * scale))


def log_uniform(rng, low, high):
    return min(high, int(math.exp(rng.uniform(math.log(low), math.log(high + 1)))))


def verse_prompt(rng, verses, length):
    """Consecutive verses from a random one on, joined by newlines, cut to `length` characters."""
    start = rng.randrange(len(verses))
    text = ""
    for verse in verses[start:] + verses[:start]:
        text += ("\n" if text else "") + verse
        if len(text) >= length:
            break
    return text[:length]


def requests(args, rng, verses):
    scale = args.context / (PROMPT_TOKENS[1] + OUTPUT_TOKENS[1])
    prompt_range = scaled_range(PROMPT_TOKENS, scale)
    output_range = scaled_range(OUTPUT_TOKENS, scale)
    arrival = 0.0
    for _ in range(args.requests):
        prompt = log_uniform(rng, *prompt_range)
        output = min(log_uniform(rng, *output_range), args.context - prompt)
        request = {"arrival": round(arrival, 6)}
        if args.kind == "synthetic":
            request["prompt_tokens"] = [rng.randrange(args.vocab) for _ in range(prompt)]
        else:
            request["prompt"] = verse_prompt(rng, verses, prompt)
        request["max_new_tokens"] = output
        yield request
        arrival += rng.expovariate(args.rate)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=["synthetic", "kjv"], required=True)
    parser.add_argument("--out", required=True, help="the JSON-lines file to write")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--rate", type=float, default=20.0, help="mean arrivals per second")
    parser.add_argument("--context", type=int, default=512, help="the deck's model.context")
    parser.add_argument("--vocab", type=int, default=63, help="synthetic: the deck's model.vocab")
    parser.add_argument("--text", default="examples/lm/kjv.txt", help="kjv: one verse per line")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.requests < 1 or args.rate <= 0 or args.context < 2 or args.vocab < 1:
        parser.error("--requests, --rate and --vocab must be positive and --context at least 2")
    verses = []
    if args.kind == "kjv":
        try:
            with open(args.text, encoding="utf-8") as f:
                verses = [line.strip() for line in f if line.strip()]
        except OSError as e:
            sys.exit(f"{sys.argv[0]}: cannot read {args.text} ({e.strerror}); make it with examples/lm/prepare_kjv.sh")
        if not verses:
            sys.exit(f"{sys.argv[0]}: {args.text} holds no verse")
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="utf-8") as out:
        for request in requests(args, rng, verses):
            out.write(json.dumps(request, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
