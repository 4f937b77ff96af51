package dev.ortserve.service;

import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.rewrite.RewriteOptions;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** ORTSERVE_ENGINE_NATIVE_MATMUL as the engine takes it: true, false, or auto (this CPU's default); anything else stops the start. */
class NativeMatMulSettingTest {

    @Test
    void trueAndFalseAreTakenAsTheyAreAndAutoIsThisCpusDefault() {
        assertTrue(ServedModelAssembler.nativeMatMul("true"));
        assertTrue(ServedModelAssembler.nativeMatMul(" TRUE "));
        assertFalse(ServedModelAssembler.nativeMatMul("false"));
        assertEquals(RewriteOptions.nativeMatMulFasterHere(), ServedModelAssembler.nativeMatMul("auto"));
    }

    @Test
    void anythingElseStopsTheStartWithTheSettingsName() {
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> ServedModelAssembler.nativeMatMul("yes"));
        assertTrue(e.getMessage().contains("ORTSERVE_ENGINE_NATIVE_MATMUL") && e.getMessage().contains("'yes'"), e.getMessage());
    }
}
