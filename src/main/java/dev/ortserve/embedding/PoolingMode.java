package dev.ortserve.embedding;

/** How token vectors become one sentence vector (sentence-transformers' 1_Pooling/config.json). */
public enum PoolingMode { MEAN, CLS, MAX, LAST_TOKEN }
