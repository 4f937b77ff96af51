package dev.ortserve.families;

import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;

@QuarkusTest
@TestProfile(Qwen3FamilyTest.Profile.class)
class Qwen3FamilyTest extends FamilyModelTest {

    @Override
    String family() {
        return "qwen3";
    }

    @Override
    String expectedToolCallParser() {
        return "hermes";
    }

    @Override
    String expectedReasoningParser() {
        return "qwen3";
    }

    public static class Profile extends NoConfiguration {
        @Override
        String family() {
            return "qwen3";
        }
    }
}
