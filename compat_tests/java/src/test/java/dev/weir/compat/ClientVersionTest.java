package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The run tests the client it was asked to (-Dkafka.version), not whatever Maven resolved. */
class ClientVersionTest {
    @Test
    void clientOnTheClasspathIsTheRequestedVersion() {
        Weir.bootstrap(); // like every test here: no broker given, no pass
        assertEquals(System.getProperty("kafka.version"), Weir.clientVersion());
    }
}
