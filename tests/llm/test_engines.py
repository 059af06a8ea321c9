"""``build_generator``: the settings it passes to the engine it builds (the real default model)."""

from toolret.llm.engines import build_generator


def test_max_prompt_tokens_reaches_the_transformers_engine(model_folder, generator):
    long_prompt = "pick one tool from this list: " + " ".join(f"tool_{i}" for i in range(1500))
    full = generator.tokenizer(long_prompt, add_special_tokens=False)["input_ids"]
    assert len(full) > 4000
    assert generator.tokenize(long_prompt) == full[-2048:]  # the engine's default: cut from the left

    wide = build_generator("transformers", str(model_folder), batch_size=2, progress=False,
                           max_prompt_tokens=len(full) + 16)
    assert wide.config.max_prompt_tokens == len(full) + 16
    assert wide.tokenize(long_prompt) == full  # nothing cut: the whole list is what the model reads
