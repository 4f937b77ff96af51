package dev.ortserve.families;

import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;

@QuarkusTest
@TestProfile(Gemma3FamilyTest.Profile.class)
class Gemma3FamilyTest extends FamilyModelTest {

    @Override
    String family() {
        return "gemma3";
    }

    @Override
    String expectedToolCallParser() {
        return "none";
    }

    @Override
    String expectedReasoningParser() {
        return "none";
    }

    public static class Profile extends NoConfiguration {
        @Override
        String family() {
            return "gemma3";
        }
    }
}
