pub use cclab_cc as cc;
