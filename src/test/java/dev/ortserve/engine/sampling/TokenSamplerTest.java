package dev.ortserve.engine.sampling;

import org.junit.jupiter.api.Test;

import java.util.Comparator;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

class TokenSamplerTest {

    /** The primitive top-k ranking equals a plain sort by (probability desc, id asc), ties included. */
    @Test
    void rankEqualsAFullSort() {
        SplittableRandom random = new SplittableRandom(9);
        for (int trial = 0; trial < 50; trial++) {
            int n = 1 + random.nextInt(3000);
            float[] p = new float[n];
            for (int i = 0; i < n; i++) p[i] = random.nextInt(4) == 0 ? 0.25f : (float) random.nextDouble();
            int[] expected = IntStream.range(0, n).boxed()
                    .sorted(Comparator.<Integer>comparingDouble(i -> -p[i]).thenComparingInt(i -> i))
                    .mapToInt(Integer::intValue).toArray();
            int k = 1 + random.nextInt(n);
            assertArrayEquals(java.util.Arrays.copyOf(expected, k), TokenSampler.rank(p, k), "k=" + k + " n=" + n);
            assertArrayEquals(expected, TokenSampler.rank(p, n));
        }
    }
}
