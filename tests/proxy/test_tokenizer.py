"""The HF-style facade over tml_renderers' Qwen3.5 tokenizer that the tests and the benchmark use."""

from tinker_cookbook.renderers.base import Message


def test_special_strings_become_single_ids(tokenizer):
    assert tokenizer.encode("<|im_start|>user\nhi<|im_end|>") == (
        [tokenizer.convert_tokens_to_ids("<|im_start|>")]
        + tokenizer.encode("user\nhi")
        + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    )
    assert tokenizer.encode("<think>\n") == [tokenizer.convert_tokens_to_ids("<think>"), *tokenizer.encode("\n")]
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end not in tokenizer.encode("<|im_end|>", split_special_tokens=True)
    text = "café <tool_call> 日本語 \n\t <|im_end|>"
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_matches_the_native_qwen35_renderer(renderer):
    from tml_renderers import chat
    from tml_renderers.renderers import Qwen35

    conversation = [
        ("System", "system", "You are helpful."),
        ("User", "user", "Hello there\n  world"),
        ("Model", "assistant", "Hi! How can I help?"),
        ("User", "user", "List files, please."),
    ]
    native_messages = [
        chat.OpenAIMessage(author=chat.Author(getattr(chat.AuthorKind, kind)), content=[chat.Text(text)])
        for kind, _, text in conversation
    ]
    spans, _parser = Qwen35().render_for_completion(native_messages)
    native = [token for span in spans for token in span.span.tokens]
    ours = renderer.build_generation_prompt([Message(role=role, content=text) for _, role, text in conversation])
    assert ours.to_ints() == native
