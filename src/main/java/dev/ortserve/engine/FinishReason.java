package dev.ortserve.engine;

public enum FinishReason { STOP, LENGTH, CANCELLED, ERROR }
