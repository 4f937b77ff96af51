package dev.ortserve.api;

import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;

@QuarkusTest
@TestProfile(ReferenceCompletionsTest.OptimumLayout.class)
class ReferenceOptimumCompletionsTest extends ReferenceCompletionsTest {
    @Override
    String fixture() {
        return "reference-llama";
    }
}
