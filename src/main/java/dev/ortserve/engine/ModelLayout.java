package dev.ortserve.engine;

/** Which export tool wrote the model directory. */
public enum ModelLayout { OPTIMUM, GENAI }
