package dev.ortserve.service.responses;

import dev.ortserve.config.OrtserveConfig;

/** A {@link CompactionSeal} outside CDI for unit tests, on the config the test hands it. */
public final class TestSeals {

    private TestSeals() {
    }

    public static CompactionSeal with(OrtserveConfig config) {
        CompactionSeal seal = new CompactionSeal();
        seal.config = config;
        return seal;
    }
}
