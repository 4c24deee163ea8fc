"""The SVG pre-check's pure rules (processors/image_sources.py): which references and entities
are refused before resvg runs, and the size an SVG is drawn at."""

from __future__ import annotations

import pytest

from filejobs.domain.retry import PermanentError
from filejobs.processors.image_sources import declared_svg_size, refuse_external_references

SVG = '<svg xmlns="http://www.w3.org/2000/svg" {}>{}</svg>'


@pytest.mark.parametrize(
    "body",
    [
        '<image href="http://example.test/x.png"/>',
        "<image xlink:href='file:///etc/passwd'/>",
        '<image HREF = "/etc/passwd"/>',
        '<image href=" relative.png"/>',
        '<image href="&ext;"/>',  # an entity: whatever it expands to is not seen here
        '<image href="&#x2F;etc/passwd"/>',
        '<feImage href="other.svg#f"/>',
        "<rect style=\"fill:url('http://example.test/p.svg#p')\"/>",
        "<style>@import 'http://example.test/s.css';</style>",
        '<!DOCTYPE svg [<!ENTITY ext SYSTEM "file:///etc/passwd">]>',
        '<!DOCTYPE svg [<!ENTITY % p "x">]>',
        "<!DOCTYPE svg [<!ENTITY img '<image h&#114;ef=\"/etc/x.png\"/>'>]>",
    ],
)
def test_a_reference_outside_the_svg_or_an_entity_that_could_spell_one_is_refused(
    body: str,
) -> None:
    with pytest.raises(PermanentError):
        refuse_external_references(SVG.format("", body))


@pytest.mark.parametrize(
    "body",
    [
        '<use href="#shape"/><use xlink:href="#shape"/>',
        '<image href="data:image/png;base64,iVBORw0KGgo="/>',
        '<rect style="fill:url(#gradient)"/><rect fill="url( \'#g\' )"/>',
        '<!DOCTYPE svg [<!ENTITY ns_svg "http://www.w3.org/2000/svg">]>',  # Illustrator's
    ],
)
def test_fragments_data_uris_and_plain_entities_are_accepted(body: str) -> None:
    refuse_external_references(SVG.format("", body))


@pytest.mark.parametrize(
    ("attributes", "size"),
    [
        ('width="800" height="600"', (800, 600)),
        ('width="8in" height="6in" viewBox="0 0 1 1"', (768, 576)),
        ('viewBox="0 0 300 600"', (300, 600)),
        ('width="100%" height="100%" viewBox="0, 0, 40, 20"', (40, 20)),
        ('width="400" viewBox="0 0 200 100"', (400, 200)),
        ('height="50mm" viewBox="0 0 2 1"', (2 * 50 * 96 / 25.4, 50 * 96 / 25.4)),
        ("", (100, 100)),
    ],
)
def test_the_declared_size_is_read_as_resvg_reads_it(
    attributes: str, size: tuple[float, float]
) -> None:
    assert declared_svg_size(SVG.format(attributes, "")) == pytest.approx(size)


@pytest.mark.parametrize(
    "attributes",
    [
        'width="2000000" height="10"',
        'viewBox="0 0 1e7 1"',
        'width="&w;" height="10"',
        'width="-5" height="10"',
        'width="10furlongs" height="10"',
        'viewBox="0 0 &w; 1"',
    ],
)
def test_an_absurd_or_unreadable_declared_size_is_refused(attributes: str) -> None:
    with pytest.raises(PermanentError):
        declared_svg_size(SVG.format(attributes, ""))
