// Planted violation for tests/architecture: runtime code that names the deck.
void run(const kpipe::config::Deck& deck);
