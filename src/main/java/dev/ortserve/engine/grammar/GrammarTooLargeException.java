package dev.ortserve.engine.grammar;

/** A grammar would need more automaton states than allowed. */
public class GrammarTooLargeException extends RuntimeException {

    public GrammarTooLargeException(String message) {
        super(message);
    }
}
