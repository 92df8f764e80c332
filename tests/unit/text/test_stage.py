"""seq2seq.text.stage without a model: a line's sentences become units and come back as one line, a
passed-through sentence untouched, spans restored, and what a user should check said per sentence."""

from seq2seq.text.stage import DEFAULTS, TextOptions, TextStage, UnitOutput


def _stage(options: TextOptions = DEFAULTS, placeholders: bool = True) -> TextStage:
    return TextStage("zh", "en", options, placeholders, too_long=lambda text: len(text) > 40)


def _echo(plans, drop: str = "") -> list[UnitOutput]:
    """What a model that copies its input would write (leaving out ``drop``)."""
    return [UnitOutput(unit.text.replace(drop, ""), 10, -5.0, 10) for plan in plans for unit in plan.units]


def test_a_paragraph_is_translated_sentence_by_sentence_and_rejoined():
    stage = _stage()
    line = "我有3个苹果。The weather is nice today.访问 https://x.org 吧!"
    plans = stage.prepare(line)
    assert [p.source for p in plans] == ["我有3个苹果。", "The weather is nice today.", "访问 https://x.org 吧!"]
    assert [len(p.units) for p in plans] == [1, 0, 1]
    assert plans[0].units[0].text == "我有⦅1⦆个苹果。"
    result = stage.finish(line, plans, _echo(plans))
    assert result.text == "我有3个苹果。 The weather is nice today. 访问 https://x.org 吧!"
    english = result.sentences[1]
    assert not english.translated and english.confidence is None and "target language" in english.warnings[0]
    assert result.sentences[0].confidence == -0.5 and result.sentences[0].warnings == []


def test_a_dropped_span_comes_back_with_a_warning():
    stage = _stage()
    plans = stage.prepare("我的电话号码是138-0013-8000。")
    result = stage.finish("", plans, _echo(plans, drop="⦅1⦆"))
    assert result.text == "我的电话号码是 138-0013-8000。"
    assert result.warnings == ["'138-0013-8000' was dropped by the model: appended"]


def test_options_turn_splitting_the_check_and_placeholders_off():
    line = "我有3个苹果。The weather is nice today."
    whole = _stage(TextOptions(split=False, check_language=False, placeholders=False)).prepare(line)
    assert len(whole) == 1 and whole[0].units[0].text == line
    forced = _stage(TextOptions(check_language=False)).prepare(line)
    # forced English is text to translate: its words are not carried through as placeholders
    assert forced[1].units[0].text == "The weather is nice today."
    assert _stage(placeholders=False).prepare("我有3个苹果。")[0].units[0].spans == []


def test_an_empty_line_stays_empty():
    stage = _stage()
    assert stage.prepare("") == [] and stage.finish("", [], []).text == ""


def test_a_long_sentence_is_cut_and_said_to_be():
    stage = _stage()
    sentence = "我想早点睡觉,但是我的朋友打电话来了,他说他明天要来北京看我,我们可以一起去吃烤鸭。"
    (plan,) = stage.prepare(sentence)
    assert len(plan.units) > 1 and "parts" in plan.warnings[0]
    assert stage.finish(sentence, [plan], _echo([plan])).text == " ".join(u.text for u in plan.units)


def test_short_long_and_repeating_outputs_are_flagged():
    stage = _stage()
    plans = stage.prepare("我今天很累,我想早点睡觉。")
    short = stage.finish("", plans, [UnitOutput("Tired.", 2, -1.0, 12)])
    assert "much shorter" in short.warnings[0]
    looping = stage.finish("", plans, [UnitOutput("I am very very very very very tired.", 9, -1.0, 12)])
    assert looping.warnings == ["the translation repeats itself"]
    long = stage.finish("", plans, [UnitOutput("word " * 60, 60, -1.0, 12)])
    assert any("much longer" in w for w in long.warnings)
