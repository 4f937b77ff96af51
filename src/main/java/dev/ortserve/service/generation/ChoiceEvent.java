package dev.ortserve.service.generation;

import dev.ortserve.engine.TokenEvent;

/** One engine event of one choice of a multi-choice generation. */
public record ChoiceEvent(int index, TokenEvent event) {
}
