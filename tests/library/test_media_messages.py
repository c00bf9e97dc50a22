"""Images and PDFs in the message model: bytes or URL, checked, and stored as base64."""

from __future__ import annotations

import pytest

from retinue.messages import (
    MAX_MEDIA_BYTES,
    DocumentPart,
    ImagePart,
    ToolResultMessage,
    UserMessage,
    dumps_conversation,
    from_dict,
    loads_conversation,
    media_part,
    message_text_size,
    to_dict,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF"


def test_user_and_tool_messages_round_trip_with_parts() -> None:
    user = UserMessage("what is this?", (ImagePart("image/png", PNG, name="a.png"),))
    tool = ToolResultMessage("c1", "Read", "page", parts=(DocumentPart("application/pdf", PDF),))
    url = UserMessage("and this", (ImagePart("image/jpeg", url="https://example.com/x.jpg"),))
    back = loads_conversation(dumps_conversation([user, tool, url]))
    assert back == [user, tool, url]
    assert to_dict(user)["parts"][0]["data"].startswith("iVBORw0KGgo")


def test_old_rows_without_parts_still_load() -> None:
    assert from_dict({"role": "user", "content": "hi"}) == UserMessage("hi")
    assert "parts" not in to_dict(UserMessage("hi"))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ImagePart("image/bmp", b"BM.."), "unsupported image media type"),
        (lambda: ImagePart("image/png", b"not a png"), "corrupt image"),
        (
            lambda: ImagePart("image/png", b"\x89PNG\r\n\x1a\n" + b"0" * MAX_MEDIA_BYTES),
            "too large",
        ),
        (lambda: ImagePart("image/png"), "either data or a url"),
        (lambda: ImagePart("image/png", url="file:///etc/passwd"), "must be http"),
        (lambda: media_part(b"PK\x03\x04zip"), "unsupported media type"),
    ],
)
def test_bad_media_is_a_one_line_error(build, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        build()
    assert "\n" not in str(info.value)


def test_a_corrupt_stored_part_is_a_one_line_error() -> None:
    row = {
        "role": "user",
        "content": "x",
        "parts": [{"type": "image", "media_type": "image/png", "data": "@@"}],
    }
    with pytest.raises(ValueError, match="bad base64"):
        from_dict(row)


def test_media_part_sniffs_the_type_and_an_image_counts_as_a_fixed_estimate() -> None:
    assert isinstance(media_part(PNG), ImagePart)
    assert isinstance(media_part(PDF), DocumentPart)
    small = UserMessage("x", (ImagePart("image/png", PNG),))
    big = UserMessage("x", (ImagePart("image/png", PNG + b"\x00" * 100_000),))
    assert message_text_size([small]) == message_text_size([big]) < 10_000
