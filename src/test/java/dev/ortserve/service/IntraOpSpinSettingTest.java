package dev.ortserve.service;

import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.ModelLoadException;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** ORTSERVE_INTRA_OP_SPINNING and ORTSERVE_INTRA_OP_SPIN_MICROS as the engine and the startup line take them. */
class IntraOpSpinSettingTest {

    @Test
    void spinningOffIgnoresTheBound() {
        assertEquals(0, ServedModelAssembler.spinMicros(false, -1));
        assertEquals(0, ServedModelAssembler.spinMicros(false, 200));
        assertEquals("not spinning", StartupSummary.spinning(0));
    }

    @Test
    void spinningOnTakesTheBoundOrOnnxruntimesOwnLoop() {
        assertEquals(200, ServedModelAssembler.spinMicros(true, 200));
        assertEquals(EngineOptions.SPIN_UNBOUNDED, ServedModelAssembler.spinMicros(true, -1));
        assertEquals("spinning up to 200 us", StartupSummary.spinning(200));
        assertEquals("spinning", StartupSummary.spinning(-1));
    }

    @Test
    void aBoundThatIsNeitherPositiveNorMinusOneStopsTheStartWithTheSettingsName() {
        for (int bad : new int[] {0, -2, Integer.MIN_VALUE}) {
            ModelLoadException e = assertThrows(ModelLoadException.class, () -> ServedModelAssembler.spinMicros(true, bad));
            assertTrue(e.getMessage().contains("ORTSERVE_INTRA_OP_SPIN_MICROS") && e.getMessage().contains(String.valueOf(bad)), e.getMessage());
        }
    }
}
