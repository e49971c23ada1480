//! The product's documentation stands on its own: no link leaves the repository.

use std::path::Path;

#[test]
fn docs_point_only_inside_the_repository() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for doc in ["README.md", "ARCHITECTURE.md", "patches/README.md"] {
        let Ok(text) = std::fs::read_to_string(repo.join(doc)) else { continue };
        for (i, line) in text.lines().enumerate() {
            assert!(!line.contains("../") && !line.contains("shared/design"), "{doc}:{}: points outside the repository: {line}", i + 1);
        }
    }
}
